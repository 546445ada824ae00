/**
 * Builds the ONNX graph of a BERT encoder (the architecture of all-MiniLM-L6-v2,
 * bge-small and their kin) from its safetensors weights, so a model shipped only
 * as `model.safetensors` runs in onnxruntime without PyTorch.
 *
 * The graph has the conventional export interface — inputs `input_ids`,
 * `attention_mask`, `token_type_ids` (int64, [batch, sequence]), output
 * `last_hidden_state` (float32, [batch, sequence, hidden]) — and follows
 * Hugging Face's BertModel in eval mode op for op: embeddings summed and
 * layer-normalised, then per layer self-attention with the additive padding mask,
 * residual + LayerNorm, exact (erf) GELU feed-forward, residual + LayerNorm.
 * Pooling is left to the caller.
 *
 * With `weights: "int8"` every linear layer's weights are quantised per output
 * channel (symmetric, scale = max |w| / 127) and its input per call
 * (DynamicQuantizeLinear), as onnxruntime's dynamic quantisation does: a
 * MatMulInteger whose int32 result is scaled back to float. About half the
 * CPU time of float32 weights on this architecture, vectors at cosine ~0.99 of
 * the float model's.
 *
 * The int8 values are stored offset by 128 as uint8 with a zero point of 128,
 * so both operands of MatMulInteger are uint8. With int8 weights onnxruntime
 * multiplies on x86 CPUs without VNNI by adding pairs of uint8 × int8 products
 * in 16 bits, which saturates (255 × 127 × 2 > 32,767): the same model then
 * gives other vectors on other CPUs. Its uint8 × uint8 kernel does not
 * saturate, and took the same time on an AVX2 machine.
 */
import onnxProto from "onnx-proto"

const { onnx } = onnxProto
type INode = onnxProto.onnx.INodeProto
type ITensor = onnxProto.onnx.ITensorProto

export interface BertConfig {
  readonly hiddenSize: number
  readonly numLayers: number
  readonly numHeads: number
  readonly intermediateSize: number
  readonly layerNormEps: number
}

/** Reads the fields of a Hugging Face `config.json` this graph needs, refusing other architectures. */
export const bertConfigFromJson = (json: unknown): BertConfig => {
  const c = json as Record<string, unknown>
  if (c.model_type !== "bert")
    throw new Error(`config.json: model_type is ${JSON.stringify(c.model_type)}, expected "bert"`)
  if ((c.hidden_act ?? "gelu") !== "gelu")
    throw new Error(`config.json: hidden_act ${JSON.stringify(c.hidden_act)} is not supported (only "gelu")`)
  if ((c.position_embedding_type ?? "absolute") !== "absolute")
    throw new Error(`config.json: position_embedding_type must be "absolute"`)
  const int = (key: string): number => {
    const v = c[key]
    if (typeof v !== "number" || !Number.isInteger(v) || v <= 0)
      throw new Error(`config.json: ${key} must be a positive integer`)
    return v
  }
  const config = {
    hiddenSize: int("hidden_size"),
    numLayers: int("num_hidden_layers"),
    numHeads: int("num_attention_heads"),
    intermediateSize: int("intermediate_size"),
    layerNormEps: typeof c.layer_norm_eps === "number" ? c.layer_norm_eps : 1e-12,
  }
  if (config.hiddenSize % config.numHeads !== 0)
    throw new Error("config.json: hidden_size is not a multiple of num_attention_heads")
  return config
}

export interface Tensor {
  readonly shape: ReadonlyArray<number>
  readonly data: Float32Array
}

/** Parses a safetensors file (8-byte header length, JSON header, raw little-endian data); float32 tensors only. */
export const readSafetensors = (bytes: Uint8Array): ReadonlyMap<string, Tensor> => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const headerLength = Number(view.getBigUint64(0, true))
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >
  const base = 8 + headerLength
  const out = new Map<string, Tensor>()
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__" || t.dtype !== "F32") continue
    const [start, end] = t.data_offsets
    const copy = new Uint8Array(end - start)
    copy.set(bytes.subarray(base + start, base + end))
    out.set(name, { shape: t.shape, data: new Float32Array(copy.buffer) })
  }
  return out
}

const FLOAT = onnx.TensorProto.DataType.FLOAT
const UINT8 = onnx.TensorProto.DataType.UINT8
const INT64 = onnx.TensorProto.DataType.INT64
const OPSET = 17 // LayerNormalization

const floatTensor = (name: string, dims: ReadonlyArray<number>, data: Float32Array): ITensor => ({
  name,
  dims: [...dims],
  dataType: FLOAT,
  rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
})
const int64Tensor = (name: string, dims: ReadonlyArray<number>, values: ReadonlyArray<number>): ITensor => {
  const data = BigInt64Array.from(values.map((v) => BigInt(v)))
  return { name, dims: [...dims], dataType: INT64, rawData: new Uint8Array(data.buffer) }
}

const uint8Tensor = (name: string, dims: ReadonlyArray<number>, data: Uint8Array): ITensor => ({
  name,
  dims: [...dims],
  dataType: UINT8,
  rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
})

/** The zero point int8 weights are stored around as uint8 (see above). */
const WEIGHT_ZERO_POINT = 128

/** Symmetric per-column quantisation of an [in, out] matrix: int8 values and one scale per column. */
export const quantisePerColumn = (
  data: Float32Array,
  rows: number,
  cols: number,
): { values: Int8Array; scales: Float32Array } => {
  const scales = new Float32Array(cols)
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) scales[c] = Math.max(scales[c]!, Math.abs(data[r * cols + c]!))
  for (let c = 0; c < cols; c++) scales[c] = scales[c]! === 0 ? 1 : scales[c]! / 127
  const values = new Int8Array(rows * cols)
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const q = Math.round(data[r * cols + c]! / scales[c]!)
      values[r * cols + c] = Math.max(-127, Math.min(127, q))
    }
  return { values, scales }
}

export interface BertOnnxOptions {
  readonly docString?: string
  /** How the linear layers' weights are stored and multiplied (default float32). */
  readonly weights?: "float32" | "int8"
}

/** PyTorch Linear weights are [out, in]; MatMul wants [in, out]. */
const transposed = (t: Tensor): Float32Array => {
  const [rows, cols] = t.shape as [number, number]
  const out = new Float32Array(rows * cols)
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = t.data[r * cols + c]!
  return out
}

const attr = {
  int: (name: string, i: number) => ({ name, type: onnx.AttributeProto.AttributeType.INT, i }),
  float: (name: string, f: number) => ({ name, type: onnx.AttributeProto.AttributeType.FLOAT, f }),
  ints: (name: string, ints: number[]) => ({ name, type: onnx.AttributeProto.AttributeType.INTS, ints }),
}

/** Serialised ONNX model of the encoder; `tensors` are the safetensors weights by their Hugging Face names. */
export const bertOnnxModel = (
  config: BertConfig,
  tensors: ReadonlyMap<string, Tensor>,
  options: BertOnnxOptions = {},
): Uint8Array => {
  const docString = options.docString ?? ""
  const nodes: INode[] = []
  const initializers: ITensor[] = []
  let counter = 0
  const fresh = (hint: string) => `${hint}_${counter++}`
  const node = (opType: string, inputs: string[], attribute: INode["attribute"] = [], hint = opType): string => {
    const output = fresh(hint)
    nodes.push({ opType, input: inputs, output: [output], name: output, attribute })
    return output
  }
  const weight = (name: string): Tensor => {
    const t = tensors.get(name)
    if (t === undefined) throw new Error(`safetensors: missing tensor ${name}`)
    return t
  }
  const init = (name: string, dims: ReadonlyArray<number>, data: Float32Array): string => {
    initializers.push(floatTensor(name, dims, data))
    return name
  }
  const param = (name: string): string => init(name, weight(name).shape, weight(name).data)
  const scalar = (name: string, value: number): string => init(name, [], Float32Array.of(value))
  const ints = (name: string, values: number[], dims: number[] = [values.length]): string => {
    initializers.push(int64Tensor(name, dims, values))
    return name
  }
  // An input quantised once for all the linear layers that read it (query, key and value share one).
  const quantisedInputs = new Map<string, { values: string; scale: string; zeroPoint: string }>()
  const quantisedInput = (x: string) => {
    const known = quantisedInputs.get(x)
    if (known !== undefined) return known
    const values = fresh(`${x}_quantised`)
    const scale = fresh(`${x}_scale`)
    const zeroPoint = fresh(`${x}_zero_point`)
    nodes.push({ opType: "DynamicQuantizeLinear", input: [x], output: [values, scale, zeroPoint], name: values })
    const made = { values, scale, zeroPoint }
    quantisedInputs.set(x, made)
    return made
  }
  const linear = (x: string, prefix: string): string => {
    const w = weight(`${prefix}.weight`)
    const [outputs, inputs] = [w.shape[0]!, w.shape[1]!]
    if (options.weights !== "int8") {
      const wt = init(`${prefix}.weight.T`, [inputs, outputs], transposed(w))
      return node("Add", [node("MatMul", [x, wt]), param(`${prefix}.bias`)])
    }
    const { values, scales } = quantisePerColumn(transposed(w), inputs, outputs)
    const offset = Uint8Array.from(values, (v) => v + WEIGHT_ZERO_POINT)
    initializers.push(uint8Tensor(`${prefix}.weight.T_quantised`, [inputs, outputs], offset))
    initializers.push(
      uint8Tensor(`${prefix}.weight.T_zero_point`, [outputs], new Uint8Array(outputs).fill(WEIGHT_ZERO_POINT)),
    )
    const weightScale = init(`${prefix}.weight.T_scale`, [outputs], scales)
    const input = quantisedInput(x)
    const product = node("MatMulInteger", [
      input.values,
      `${prefix}.weight.T_quantised`,
      input.zeroPoint,
      `${prefix}.weight.T_zero_point`,
    ])
    const scale = node("Mul", [input.scale, weightScale])
    return node("Add", [
      node("Mul", [node("Cast", [product], [attr.int("to", FLOAT)]), scale]),
      param(`${prefix}.bias`),
    ])
  }
  const layerNorm = (x: string, prefix: string): string =>
    node(
      "LayerNormalization",
      [x, param(`${prefix}.weight`), param(`${prefix}.bias`)],
      [attr.int("axis", -1), attr.float("epsilon", config.layerNormEps)],
    )

  const { hiddenSize: hidden, numHeads: heads } = config
  const headDim = hidden / heads

  // Embeddings: word + position (0..S-1) + token type, then LayerNorm.
  const seqLen = node("Gather", [node("Shape", ["input_ids"]), ints("const_one_index", [1], [])], [attr.int("axis", 0)])
  const positions = node("Range", [ints("const_zero", [0], []), seqLen, ints("const_one", [1], [])])
  const words = node("Gather", [param("embeddings.word_embeddings.weight"), "input_ids"], [attr.int("axis", 0)])
  const pos = node("Gather", [param("embeddings.position_embeddings.weight"), positions], [attr.int("axis", 0)])
  const types = node(
    "Gather",
    [param("embeddings.token_type_embeddings.weight"), "token_type_ids"],
    [attr.int("axis", 0)],
  )
  let x = layerNorm(node("Add", [node("Add", [words, pos]), types]), "embeddings.LayerNorm")

  // Additive mask [B, 1, 1, S]: 0 where attended, a large negative where padded.
  const maskFloat = node("Cast", ["attention_mask"], [attr.int("to", FLOAT)])
  const maskBias = node("Unsqueeze", [
    node("Mul", [node("Sub", [scalar("const_f_one", 1), maskFloat]), scalar("const_mask_min", -3.4028234663852886e38)]),
    ints("const_axes_1_2", [1, 2]),
  ])

  const splitHeads = ints("const_split_heads", [0, 0, heads, headDim])
  const mergeHeads = ints("const_merge_heads", [0, 0, hidden])
  const sqrtHeadDim = scalar("const_sqrt_head_dim", Math.sqrt(headDim))
  const half = scalar("const_half", 0.5)
  const sqrt2 = scalar("const_sqrt2", Math.SQRT2)
  const one = "const_f_one"

  for (let l = 0; l < config.numLayers; l++) {
    const p = `encoder.layer.${l}`
    const headsOf = (t: string, perm: number[]) =>
      node("Transpose", [node("Reshape", [t, splitHeads])], [attr.ints("perm", perm)])
    const q = headsOf(linear(x, `${p}.attention.self.query`), [0, 2, 1, 3])
    const k = headsOf(linear(x, `${p}.attention.self.key`), [0, 2, 3, 1])
    const v = headsOf(linear(x, `${p}.attention.self.value`), [0, 2, 1, 3])
    const scores = node("Add", [node("Div", [node("MatMul", [q, k]), sqrtHeadDim]), maskBias])
    const probs = node("Softmax", [scores], [attr.int("axis", -1)])
    const context = node("Reshape", [
      node("Transpose", [node("MatMul", [probs, v])], [attr.ints("perm", [0, 2, 1, 3])]),
      mergeHeads,
    ])
    const attended = layerNorm(
      node("Add", [linear(context, `${p}.attention.output.dense`), x]),
      `${p}.attention.output.LayerNorm`,
    )
    const inner = linear(attended, `${p}.intermediate.dense`)
    const gelu = node("Mul", [
      node("Mul", [inner, half]),
      node("Add", [node("Erf", [node("Div", [inner, sqrt2])]), one]),
    ])
    x = layerNorm(node("Add", [linear(gelu, `${p}.output.dense`), attended]), `${p}.output.LayerNorm`)
  }
  nodes.push({ opType: "Identity", input: [x], output: ["last_hidden_state"], name: "last_hidden_state" })

  const dims = (...names: Array<string | number>) => ({
    dim: names.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })),
  })
  const input = (name: string) => ({
    name,
    type: { tensorType: { elemType: INT64, shape: dims("batch", "sequence") } },
  })
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: "", version: OPSET }],
    producerName: "working-memory",
    docString,
    graph: {
      name: "bert-encoder",
      node: nodes,
      initializer: initializers,
      input: [input("input_ids"), input("attention_mask"), input("token_type_ids")],
      output: [
        {
          name: "last_hidden_state",
          type: { tensorType: { elemType: FLOAT, shape: dims("batch", "sequence", hidden) } },
        },
      ],
    },
  })
  return onnx.ModelProto.encode(model).finish()
}
