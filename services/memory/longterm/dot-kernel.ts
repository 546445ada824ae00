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

// prettier-ignore
const MODULE = new Uint8Array([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00,
  // type: (i32 i32 i32 i32 i32) -> ()
  0x01,
  0x09,
  0x01,
  0x60,
  0x05,
  0x7f,
  0x7f,
  0x7f,
  0x7f,
  0x7f,
  0x00,
  // import env.memory, at least one page
  0x02,
  0x0f,
  0x01,
  0x03,
  0x65,
  0x6e,
  0x76,
  0x06,
  0x6d,
  0x65,
  0x6d,
  0x6f,
  0x72,
  0x79,
  0x02,
  0x00,
  0x01,
  // one function of type 0
  0x03,
  0x02,
  0x01,
  0x00,
  // export "scores"
  0x07,
  0x0a,
  0x01,
  0x06,
  0x73,
  0x63,
  0x6f,
  0x72,
  0x65,
  0x73,
  0x00,
  0x00,
  // code
  0x0a,
  0x00,
  0x00 /* section size, patched */,
  0x01,
  0x00,
  0x00 /* body size, patched */,
  0x02,
  0x01,
  0x7f,
  0x01,
  0x7b, // locals: j i32 (5), acc v128 (6)
  0x02,
  0x40, // block $done
  0x20,
  0x03,
  0x45,
  0x0d,
  0x00, // rows == 0 → done
  0x03,
  0x40, // loop $rows
  0xfd,
  0x0c,
  ...new Array(16).fill(0),
  0x21,
  0x06, // acc = 0
  0x41,
  0x00,
  0x21,
  0x05, // j = 0
  0x03,
  0x40, // loop $cols
  0x20,
  0x06,
  0x20,
  0x00,
  0x20,
  0x05,
  0x6a,
  0xfd,
  0x00,
  0x00,
  0x00, // v128.load matrix + j
  0x20,
  0x01,
  0x20,
  0x05,
  0x6a,
  0xfd,
  0x00,
  0x00,
  0x00, // v128.load query + j
  0xfd,
  0xe6,
  0x01, // f32x4.mul
  0xfd,
  0xe4,
  0x01, // f32x4.add
  0x21,
  0x06,
  0x20,
  0x05,
  0x41,
  0x10,
  0x6a,
  0x22,
  0x05, // j += 16
  0x20,
  0x04,
  0x49,
  0x0d,
  0x00, // j < stride → cols
  0x0b, // end $cols
  0x20,
  0x02, // out
  0x20,
  0x06,
  0xfd,
  0x1f,
  0x00,
  0x20,
  0x06,
  0xfd,
  0x1f,
  0x01,
  0x92,
  0x20,
  0x06,
  0xfd,
  0x1f,
  0x02,
  0x92,
  0x20,
  0x06,
  0xfd,
  0x1f,
  0x03,
  0x92,
  0x38,
  0x02,
  0x00, // f32.store
  0x20,
  0x00,
  0x20,
  0x04,
  0x6a,
  0x21,
  0x00, // matrix += stride
  0x20,
  0x02,
  0x41,
  0x04,
  0x6a,
  0x21,
  0x02, // out += 4
  0x20,
  0x03,
  0x41,
  0x01,
  0x6b,
  0x22,
  0x03,
  0x0d,
  0x00, // --rows → rows
  0x0b, // end $rows
  0x0b, // end $done
  0x0b, // end function
])
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
