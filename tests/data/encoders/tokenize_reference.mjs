// Expected WordPiece ids from an independent implementation: transformers.js (a JS port of HF tokenizers)
// loading the fixture tokenizer.json files in tokenizers/{uncased,cased}/. Writes wordpiece_expected.json.
// Usage (transformers.js installed outside the repo, e.g. `cd /work/tjs && npm install --ignore-scripts @huggingface/transformers`):
//   NODE_PATH=/work/tjs/node_modules node tokenize_reference.mjs [/work/tjs/node_modules]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = process.argv[2] || "/work/tjs/node_modules";
const tjsDir = path.join(modules, "@huggingface", "transformers");
const req = createRequire(path.join(modules, "x.js"));
const tjsMain = req.resolve("@huggingface/transformers");
const { env, AutoTokenizer } = await import(pathToFileURL(tjsMain).href);
const version = (d) => JSON.parse(fs.readFileSync(path.join(d, "package.json"), "utf8")).version;

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.join(here, "tokenizers") + path.sep;

const glue = path.resolve(here, "../../../../shared/data/glue");
const readTsv = (f) => fs.readFileSync(path.join(glue, f), "utf8").split("\n").slice(1).filter((r) => r.length > 0).map((r) => r.split("\t"));
const sources = [
  { key: "sst2_dev", file: "SST-2/dev.tsv", column: "sentence", col_index: 0 },
  { key: "stsb_dev_sentence1", file: "STS-B/dev.tsv", column: "sentence1", col_index: 7 },
  { key: "stsb_dev_sentence2", file: "STS-B/dev.tsv", column: "sentence2", col_index: 8 },
];

const tricky = [
  ["accents", "Café naïve résumé"],
  ["accents_upper", "CAFÉ NAÏVE RÉSUMÉ Ångström"],
  ["chinese", "我想在apple工作1314151天"],
  ["japanese_kana", "ひらがな カタカナ です"],
  ["control_and_tabs", "a\tb\u0000c\u0007d\r\ne\u200bf"],
  ["no_break_spaces", "hello\u00a0world\u00a0\u00a0again"],
  ["punctuation_runs", "wait...!!?? --- (yes) [no] {maybe} 'quoted' \"double\""],
  ["dont", "don't won't it's"],
  ["long_word_120", "a".repeat(60) + "b".repeat(60)],
  ["word_100_chars", "c".repeat(100)],
  ["word_101_chars", "c".repeat(101)],
  ["outside_vocab_chars", "\u0416\u0436\u0429 ok"],
  ["emoji", "good 🚀 movie 😶‍🌫️ ✅"],
  ["mixed_case", "ThE MoViE wAs GrEaT"],
  ["empty", ""],
  ["only_spaces", "    "],
  ["arabic", "مرحبا بالعالم"],
  ["combining_marks", "e\u0301te\u0301 n\u0303 A\u030a"],
  ["numbers", "3.14 1,000,000 42nd 1990s"],
  ["unknown_suffix", "unflinchingly bleak and desperate"],
  ["fullwidth_and_symbols", "ＡＢＣ ½ © ™ €5"],
  ["hyphen_slash", "state-of-the-art and/or e-mail"],
];

const out = {
  meta: {
    generator: "tokenize_reference.mjs",
    transformers_js: version(tjsDir),
    huggingface_tokenizers_js: version(path.join(modules, "@huggingface", "tokenizers")),
    node: process.version,
    glue_dir: "../shared/data/glue (relative to the repo root)",
    row: "0-based data row of the TSV (the header line is not counted)",
    ids: "add_special_tokens false unless stated",
  },
  variants: {},
};

for (const variant of ["uncased", "cased"]) {
  const tok = await AutoTokenizer.from_pretrained(variant);
  const vocab = JSON.parse(fs.readFileSync(path.join(here, "tokenizers", variant, "tokenizer.json"), "utf8")).model.vocab;
  const inv = [];
  for (const [t, i] of Object.entries(vocab)) inv[i] = t;  // tokens of the ids, for reading only
  const v = {
    tokenizer: `tokenizers/${variant}/tokenizer.json`,
    vocab_size: Object.keys(vocab).length,
    pad_id: vocab["[PAD]"], unk_id: vocab["[UNK]"], cls_id: vocab["[CLS]"], sep_id: vocab["[SEP]"], mask_id: vocab["[MASK]"],
    glue: {}, tricky: [], pair: null,
  };
  for (const s of sources) {
    const rows = readTsv(s.file);
    v.glue[s.key] = { file: s.file, column: s.column, col_index: s.col_index, rows: rows.length,
                      ids: rows.map((r) => tok.encode(r[s.col_index], { add_special_tokens: false })) };
  }
  for (const [name, text] of tricky) {
    const ids = tok.encode(text, { add_special_tokens: false });
    v.tricky.push({ name, text, ids, tokens: ids.map((i) => inv[i]) });
  }
  const text = "A man with a hard hat is dancing.";
  const text_pair = "A man wearing a hard hat is dancing.";
  const enc = tok(text, { text_pair, add_special_tokens: true, return_tensor: false });
  v.pair = { text, text_pair, input_ids: enc.input_ids, token_type_ids: enc.token_type_ids, attention_mask: enc.attention_mask };
  out.variants[variant] = v;
}

// objects indented, every array of numbers (and each row of a list of id lists) on one line
const enc = (o, ind) => {
  const pad = " ".repeat(ind);
  if (Array.isArray(o)) {
    if (o.length && Array.isArray(o[0])) return "[\n" + o.map((r) => pad + " " + JSON.stringify(r)).join(",\n") + "\n" + pad + "]";
    if (o.length && typeof o[0] === "object") return "[\n" + o.map((r) => pad + " " + enc(r, ind + 1)).join(",\n") + "\n" + pad + "]";
    return JSON.stringify(o);
  }
  if (o && typeof o === "object") {
    return "{\n" + Object.entries(o).map(([k, x]) => `${pad} ${JSON.stringify(k)}: ${enc(x, ind + 1)}`).join(",\n") + "\n" + pad + "}";
  }
  return JSON.stringify(o);
};
fs.writeFileSync(path.join(here, "wordpiece_expected.json"), enc(out, 0) + "\n");
console.log(`wordpiece_expected.json: transformers.js ${out.meta.transformers_js}`);
for (const [k, v] of Object.entries(out.variants)) {
  const all = Object.values(v.glue).flatMap((g) => g.ids);
  const unk = all.filter((ids) => ids.includes(v.unk_id)).length;
  console.log(`${k}: ${all.length} glue texts, ${all.flat().length} ids, ${unk} with [UNK]; pair ${JSON.stringify(v.pair.input_ids)}`);
}
