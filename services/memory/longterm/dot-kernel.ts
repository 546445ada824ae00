/**
 * The inner products of a query with every row of a matrix, four lanes at a
 * time (WebAssembly SIMD): the scan that exact dense search spends its time
 * in runs ~5× faster than the same loop in JavaScript. The module is written
 * out byte by byte below (no toolchain); it exports
 *
 *   scores(matrix, query, out, rows, strideBytes)
 *
 * over its imported memory: out[r] = Σ_j matrix[r·stride + j] · query[j],
 * with `strideBytes` a multiple of 16 (rows padded with zeros).
 */

// Bytes in hex, one instruction or section field per line, `#` to the end of a line a comment.
const SOURCE = `
  00 61 73 6d 01 00 00 00                # magic, version 1
  01 09 01 60 05 7f 7f 7f 7f 7f 00       # type 0: (i32 i32 i32 i32 i32) -> ()
  02 0f 01 03 65 6e 76 06 6d 65 6d 6f 72 79 02 00 01   # import env.memory, at least one page
  03 02 01 00                            # one function, of type 0
  07 0a 01 06 73 63 6f 72 65 73 00 00    # export it as "scores"
  0a 00 00 01 00 00                      # code section, one body (sizes patched below)
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
const MODULE = Uint8Array.from(SOURCE.replace(/#.*$/gm, "").trim().split(/\s+/), (hex) => Number.parseInt(hex, 16))
{
  // After the header and the type, import, function and export sections.
  const codeStart = 8 + 11 + 17 + 4 + 12
  // Sizes as two-byte LEB128 (a longer encoding than needed is valid).
  const leb2 = (at: number, size: number) => {
    MODULE[at] = (size & 0x7f) | 0x80
    MODULE[at + 1] = size >> 7
  }
  leb2(codeStart + 1, MODULE.length - (codeStart + 3))
  leb2(codeStart + 4, MODULE.length - (codeStart + 6))
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

const compiled: WasmModule | undefined = WebAssembly.validate(MODULE) ? new WebAssembly.Module(MODULE) : undefined

/** A kernel over `memory`, or undefined where WebAssembly SIMD is not available. */
export const dotKernel = (memory: WasmMemory): ScoresFunction | undefined =>
  compiled === undefined
    ? undefined
    : (new WebAssembly.Instance(compiled, { env: { memory } }).exports.scores as ScoresFunction)
