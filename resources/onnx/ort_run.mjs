// Runs an ONNX model in ONNX Runtime (the npm package onnxruntime-node) for the tests
// (tests/onnx_runtime.hpp) and for `embedlab-cli bench onnx` (cli/command_bench_onnx.cpp);
// scripts/setup.sh --with-tests installs the package.
//
//   EMBEDLAB_ONNXRUNTIME_DIR=DIR node ort_run.mjs MODEL.onnx REQUEST.json
//
// DIR holds node_modules/onnxruntime-node. REQUEST.json:
//   {"inputs":  [{"name": "input_ids", "type": "int64", "shape": [1, 5], "file": "in0.bin"}, ...],
//    "outputs": [{"name": "logits", "file": "out0.bin"}, ...],
//    "repeat": 1,      // runs, timed together (default 1)
//    "threads": 1}     // ONNX Runtime's intra-op threads (default: its own choice)
// Input files hold the tensor's raw little-endian data (int64, int32 or float32); each
// requested output's data is written to its file as raw little-endian float32 (outputs of
// other element types are converted). Relative file names are relative to REQUEST.json's
// directory. Prints one JSON line on stdout:
//   {"load_seconds": session creation, "run_seconds": mean per run,
//    "peak_rss_bytes": the node process's peak resident set (node's own ~50 MB included),
//    "outputs": [{"name", "shape", "type"}, ...]}
// On an error: a message on stderr and exit status 1 (2 for a usage error).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";

function fail(message, status = 1) {
  process.stderr.write(`ort_run: ${message}\n`);
  process.exit(status);
}

// IEEE 754 half -> number.
function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

function asFloat32(name, tensor) {
  const data = tensor.data;
  if (data instanceof Float32Array) return data;
  const out = new Float32Array(data.length);
  if (tensor.type === "float16" && data instanceof Uint16Array) {
    for (let i = 0; i < data.length; ++i) out[i] = halfToNumber(data[i]);
  } else if (tensor.type === "string") {
    throw new Error(`output '${name}' holds strings`);
  } else {
    for (let i = 0; i < data.length; ++i) out[i] = Number(data[i]);
  }
  return out;
}

const ARRAYS = { int64: BigInt64Array, int32: Int32Array, float32: Float32Array };

async function main() {
  const [modelPath, requestPath] = process.argv.slice(2);
  if (!modelPath || !requestPath || process.argv.length !== 4)
    fail("usage: node ort_run.mjs MODEL.onnx REQUEST.json (with EMBEDLAB_ONNXRUNTIME_DIR set)", 2);
  const dir = process.env.EMBEDLAB_ONNXRUNTIME_DIR;
  if (!dir) fail("EMBEDLAB_ONNXRUNTIME_DIR is not set (the directory that holds node_modules/onnxruntime-node)", 2);

  let ort;
  try {
    ort = createRequire(import.meta.url)(join(resolve(dir), "node_modules", "onnxruntime-node"));
  } catch (e) {
    fail(`cannot load onnxruntime-node from ${resolve(dir)}/node_modules: ${e.message}`);
  }

  const request = JSON.parse(readFileSync(requestPath, "utf8"));
  const base = dirname(resolve(requestPath));
  const path = (file) => (isAbsolute(file) ? file : join(base, file));
  const repeat = request.repeat ?? 1;
  if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`repeat must be a positive integer, not ${repeat}`);

  const feeds = {};
  for (const input of request.inputs ?? []) {
    const TypedArray = ARRAYS[input.type];
    if (!TypedArray) throw new Error(`input '${input.name}': type '${input.type}' (it can be int64, int32 or float32)`);
    const shape = input.shape.map(Number);
    const count = shape.reduce((a, b) => a * b, 1);
    const bytes = readFileSync(path(input.file));
    if (bytes.length !== count * TypedArray.BYTES_PER_ELEMENT)
      throw new Error(
        `input '${input.name}': ${input.file} has ${bytes.length} bytes; shape [${shape}] of ${input.type} needs ${count * TypedArray.BYTES_PER_ELEMENT}`,
      );
    // A copy: the Buffer's offset in its ArrayBuffer need not be aligned.
    const data = new TypedArray(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    feeds[input.name] = new ort.Tensor(input.type, data, shape);
  }

  const options = { logSeverityLevel: 3 };
  if (request.threads !== undefined) {
    options.intraOpNumThreads = request.threads;
    options.interOpNumThreads = 1;
  }
  const loadStart = performance.now();
  const session = await ort.InferenceSession.create(modelPath, options);
  const loadSeconds = (performance.now() - loadStart) / 1000;

  const wanted = (request.outputs ?? []).map((o) => o.name);
  for (const name of wanted)
    if (!session.outputNames.includes(name))
      throw new Error(`the model has no output '${name}' (its outputs: ${session.outputNames.join(", ")})`);
  for (const name of Object.keys(feeds))
    if (!session.inputNames.includes(name))
      throw new Error(`the model has no input '${name}' (its inputs: ${session.inputNames.join(", ")})`);

  let results;
  const runStart = performance.now();
  for (let r = 0; r < repeat; ++r) results = await session.run(feeds, wanted);
  const runSeconds = (performance.now() - runStart) / 1000 / repeat;

  const outputs = [];
  for (const o of request.outputs ?? []) {
    const tensor = results[o.name];
    const data = asFloat32(o.name, tensor);
    writeFileSync(path(o.file), new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    outputs.push({ name: o.name, shape: tensor.dims.map(Number), type: tensor.type });
  }
  await session.release();
  process.stdout.write(
    JSON.stringify({
      load_seconds: loadSeconds,
      run_seconds: runSeconds,
      peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
      outputs,
    }) + "\n",
  );
}

main().then(
  () => process.exit(0),
  (e) => fail(e && e.message ? e.message : String(e)),
);
