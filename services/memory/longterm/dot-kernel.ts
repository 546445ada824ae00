/**
 * The inner products of a query with every row of a matrix, four lanes at a
 * time (WebAssembly SIMD): the scan that exact dense search spends its time
 * in. Two kernels, each a module written out byte by byte below (no
 * toolchain), each exporting
 *
 *   scores(matrix, query, out, rows, strideBytes)
 *
 * over its imported memory, with `strideBytes` a multiple of 16 (rows padded
 * with zeros):
 *
 * - float32: out[r] = Σ_j matrix[r·stride + j] · query[j], float32 rows and
 *   query, float32 out; ~5× faster than the same loop in JavaScript.
 * - int8 (a quarter of the float32 scan's bytes, for a first pass that
 *   float32 rescores): the same sum over int8 rows and an int16 query, exact
 *   in int32 (the caller keeps |query| small enough that no lane can
 *   overflow); each row ends with two float32s, its scale a and its error
 *   term u, over which the query is zero. With three more arguments
 *   (queryScale, queryNorm, slack) it writes per row two float32s, an upper
 *   and a lower bound, rounded outwards:
 *     estimate = Σ · a · queryScale,  error = u · queryNorm + slack,
 *     out[2r] ≥ estimate + error,  out[2r + 1] ≤ estimate − error.
 */

// Bytes in hex, one instruction or section field per line, `#` to the end of a line a comment.
const MAGIC = "00 61 73 6d 01 00 00 00" // magic, version 1
// The float32 kernel's type: (matrix, query, out, rows, strideBytes) -> ().
const FLOAT32_TYPE = "01 09 01 60 05 7f 7f 7f 7f 7f 00"
// The import, function and export sections; then the code section's start, its sizes patched below.
const SECTIONS = `
  02 0f 01 03 65 6e 76 06 6d 65 6d 6f 72 79 02 00 01   # import env.memory, at least one page
  03 02 01 00                            # one function, of type 0
  07 0a 01 06 73 63 6f 72 65 73 00 00    # export it as "scores"
  0a 00 00 01 00 00                      # code section, one body (sizes patched below)
`
const FLOAT32_BODY = `
  02 01 7f 01 7b                         # locals: j i32 (5), acc v128 (6)
  02 40                                  # block $done
  20 03 45 0d 00                         #   rows == 0 → done
  03 40                                  #   loop $rows
  fd 0c 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 21 06   # acc = 0
  41 00 21 05                            #     j = 0
  03 40                                  #     loop $cols
  20 06                                  #       acc
  20 00 20 05 6a fd 00 00 00             #       v128.load matrix + j
  20 01 20 05 6a fd 00 00 00             #       v128.load query + j
  fd e6 01                               #       f32x4.mul
  fd e4 01 21 06                         #       acc = acc + product
  20 05 41 10 6a 22 05                   #       j += 16
  20 04 49 0d 00                         #       j < stride → cols
  0b                                     #     end $cols
  20 02                                  #     out
  20 06 fd 1f 00                         #     lane 0
  20 06 fd 1f 01 92                      #     + lane 1
  20 06 fd 1f 02 92                      #     + lane 2
  20 06 fd 1f 03 92                      #     + lane 3
  38 02 00                               #     f32.store
  20 00 20 04 6a 21 00                   #     matrix += stride
  20 02 41 04 6a 21 02                   #     out += 4
  20 03 41 01 6b 22 03 0d 00             #     --rows → rows
  0b                                     #   end $rows
  0b                                     # end $done
  0b                                     # end function
`
// The int8 kernel's type: (matrix, query, out, rows, strideBytes, queryScale, queryNorm, slack: f64) -> ().
const INT8_TYPE = "01 0c 01 60 08 7f 7f 7f 7f 7f 7c 7c 7c 00"
const INT8_BODY = `
  03 01 7f 02 7b 03 7c                   # locals: j i32 (8), acc x v128 (9 10), estimate error t f64 (11 12 13)
  02 40                                  # block $done
  20 03 45 0d 00                         #   rows == 0 → done
  03 40                                  #   loop $rows
  fd 0c 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 21 09   # acc = 0
  41 00 21 08                            #     j = 0
  03 40                                  #     loop $cols
  20 00 20 08 6a fd 00 00 00 21 0a       #       x = v128.load matrix + j (16 int8)
  20 09                                  #       acc
  20 0a fd 87 01                         #       i16x8.extend_low_i8x16_s x
  20 01 20 08 41 01 74 6a fd 00 00 00    #       v128.load query + 2j (8 int16)
  fd ba 01                               #       i32x4.dot_i16x8_s
  fd ae 01                               #       i32x4.add
  20 0a fd 88 01                         #       i16x8.extend_high_i8x16_s x
  20 01 20 08 41 01 74 6a fd 00 00 10    #       v128.load query + 2j + 16
  fd ba 01                               #       i32x4.dot_i16x8_s
  fd ae 01 21 09                         #       acc = i32x4.add
  20 08 41 10 6a 22 08                   #       j += 16
  20 04 49 0d 00                         #       j < stride → cols
  0b                                     #     end $cols
  20 09 fd 1b 00                         #     lane 0
  20 09 fd 1b 01 6a                      #     + lane 1
  20 09 fd 1b 02 6a                      #     + lane 2
  20 09 fd 1b 03 6a                      #     + lane 3: the integer product
  b7                                     #     f64.convert_i32_s
  20 00 20 04 6a 41 08 6b 2a 02 00 bb    #     × the row's scale (f32 at stride − 8)
  a2
  20 05 a2 21 0b                         #     × queryScale → estimate
  20 00 20 04 6a 41 04 6b 2a 02 00 bb    #     the row's error term (f32 at stride − 4)
  20 06 a2 20 07 a0 21 0c                #     × queryNorm + slack → error
  20 02                                  #     out
  20 0b 20 0c a0 22 0d                   #     t = estimate + error
  20 0d 99 44 00 00 00 00 00 00 90 3e a2 a0   # t + |t|·2⁻²², so that float32 rounding cannot lower it
  b6 38 02 00                            #     f32.store out[0] (upper bound)
  20 02                                  #     out
  20 0b 20 0c a1 22 0d                   #     t = estimate − error
  20 0d 99 44 00 00 00 00 00 00 90 3e a2 a1   # t − |t|·2⁻²²
  b6 38 02 04                            #     f32.store out[1] (lower bound)
  20 00 20 04 6a 21 00                   #     matrix += stride
  20 02 41 08 6a 21 02                   #     out += 8
  20 03 41 01 6b 22 03 0d 00             #     --rows → rows
  0b                                     #   end $rows
  0b                                     # end $done
  0b                                     # end function
`
const bytes = (source: string) => source.replace(/#.*$/gm, "").trim().split(/\s+/)
const moduleOf = (type: string, body: string): Uint8Array => {
  const module = Uint8Array.from([...bytes(MAGIC), ...bytes(type), ...bytes(SECTIONS), ...bytes(body)], (hex) =>
    Number.parseInt(hex, 16),
  )
  // After the header and the type, import, function and export sections.
  const codeStart = 8 + bytes(type).length + 17 + 4 + 12
  // Sizes as two-byte LEB128 (a longer encoding than needed is valid).
  const leb2 = (at: number, size: number) => {
    module[at] = (size & 0x7f) | 0x80
    module[at + 1] = size >> 7
  }
  leb2(codeStart + 1, module.length - (codeStart + 3))
  leb2(codeStart + 4, module.length - (codeStart + 6))
  return module
}

/** The part of the WebAssembly global used here (the project's lib, ES2023 without the DOM, does not type it). */
export interface WasmMemory {
  readonly buffer: ArrayBuffer
  grow(pages: number): number
}
interface WasmModule {
  readonly _brand: "WebAssembly.Module"
}
declare const WebAssembly: {
  validate(bytes: Uint8Array): boolean
  Module: new (bytes: Uint8Array) => WasmModule
  Instance: new (module: WasmModule, imports: object) => { readonly exports: Record<string, unknown> }
  Memory: new (descriptor: { initial: number }) => WasmMemory
}

/** A memory of `pages` 64 KiB pages that kernels can be made over. */
export const wasmMemory = (pages: number): WasmMemory => new WebAssembly.Memory({ initial: pages })

export type ScoresFunction = (matrix: number, query: number, out: number, rows: number, strideBytes: number) => void
export type BoundsFunction = (
  matrix: number,
  query: number,
  out: number,
  rows: number,
  strideBytes: number,
  queryScale: number,
  queryNorm: number,
  slack: number,
) => void

const compile = (module: Uint8Array): WasmModule | undefined =>
  WebAssembly.validate(module) ? new WebAssembly.Module(module) : undefined
const float32Module = compile(moduleOf(FLOAT32_TYPE, FLOAT32_BODY))
const int8Module = compile(moduleOf(INT8_TYPE, INT8_BODY))

const instance = (compiled: WasmModule | undefined, memory: WasmMemory): unknown =>
  compiled === undefined ? undefined : new WebAssembly.Instance(compiled, { env: { memory } }).exports.scores

/** The float32 kernel over `memory`, or undefined where WebAssembly SIMD is not available. */
export const dotKernel = (memory: WasmMemory): ScoresFunction | undefined =>
  instance(float32Module, memory) as ScoresFunction | undefined

/** The int8 × int16 bounds kernel over `memory`, or undefined where WebAssembly SIMD is not available. */
export const int8BoundsKernel = (memory: WasmMemory): BoundsFunction | undefined =>
  instance(int8Module, memory) as BoundsFunction | undefined
