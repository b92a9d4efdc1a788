// The page "Translate in your browser" (chapters/05_transformer/06_translate_in_browser.md):
// chapter 5's Transformer, exported to ONNX by tools/export_translator.py, run by
// onnxruntime-web's WebAssembly backend on the reader's CPU.
//
// The encoder program runs once per sentence; the decoder-step program runs once per
// output word with the key/value cache of chapter 6. Everything the page needs to know
// about the model (vocabularies, special tokens, lengths, program names, layers, heads)
// comes from _static/translator/translator.json. The tokeniser and greedy decoding repeat
// attention_lib's (data.preprocess, data.tokenize, TranslationData.encode,
// decoding.greedy_decode) exactly; tests/site/test_translator_page.py checks both against
// Python. User text only ever reaches the page through textContent.
//
// The page splits the reader's text at sentence ends and translates each sentence on
// its own (the model was trained on single sentences). It downloads onnxruntime's
// WebAssembly first, then the decoder step, then the encoder, so that the runtime
// starts while the rest is still on its way, and shows the bytes as they arrive; the
// build (book/_ext/site_assets.py) writes gzipped copies of these three files and the
// sizes of everything into the page.

const HERE = new URL('.', import.meta.url); // _static/
const ORT_DIR = new URL('vendor/onnxruntime-web/', HERE);
const ORT_MODULE = 'vendor/onnxruntime-web/ort.wasm.min.mjs';
const ORT_GLUE = 'vendor/onnxruntime-web/ort-wasm-simd-threaded.mjs';
const ORT_WASM = 'vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm';
const SVG = 'http://www.w3.org/2000/svg';
const MAX_SENTENCES = 5; // translated at once; the rest is named as left out
const NEARLY_DONE = 50e3; // bytes left in one download when the next one is asked for

// --- Tokenisation: attention_lib/data.py ---------------------------------------------

/** data.preprocess: non-breaking spaces to spaces, lower-case, a space before , . ! ?
 * (walked by code point, as Python walks a str). */
export function preprocess(text) {
  const chars = Array.from(
    String(text).replaceAll('\u202f', ' ').replaceAll('\u00a0', ' ').toLowerCase());
  let out = '';
  chars.forEach((char, i) => {
    if (i > 0 && ',.!?'.includes(char) && chars[i - 1] !== ' ') out += ' ';
    out += char;
  });
  return out;
}

/** The reader's text cut after each run of . ! ? that whitespace follows: one piece a
 * sentence, the whitespace between them dropped, pieces with no token left out. Text
 * with no such break comes back whole, unchanged. */
export function splitSentences(text) {
  const source = String(text);
  const pieces = [];
  let start = 0;
  for (const match of source.matchAll(/([.!?]+)\s+/gu)) {
    pieces.push(source.slice(start, match.index + match[1].length));
    start = match.index + match[0].length;
  }
  pieces.push(source.slice(start));
  return pieces.filter((piece) => tokenize(preprocess(piece)).length > 0);
}

/** Punctuation only: what preprocess splits off (, . ! ?), alone or in a run. */
export function isPunctuation(token) {
  return /^[,.!?]+$/u.test(token);
}

/** data.tokenize: split on the space character only, no empty tokens. */
export function tokenize(text) {
  return String(text).split(' ').filter((token) => token.length > 0);
}

/** _Stack.check_tokens (attention_lib/transformer.py): null when L positions after
 * `offset` earlier ones fit the model's max_len, else the library's message. */
export function checkPositions(name, length, offset, maxLen) {
  if (offset + length <= maxLen) return null;
  const start = offset ? ` after ${offset} earlier positions` : '';
  return `${name} has L=${length} positions${start}, more than the model's`
    + ` max_len=${maxLen} (the positions its encoding was built for); cut the input`
    + ' or build the model with a larger max_len';
}

/** TranslationData.encode for one sentence: indices with <eos> appended, truncated to
 * num_steps, padded; the valid length counts the entries that are not <pad>. Also what
 * the page tells the reader: the tokens, which are unknown, which were cut. */
export function encode(settings, sentence) {
  const index = vocabIndex(settings);
  const tokens = tokenize(preprocess(sentence));
  const ids = tokens.map((token) => (index.has(token) ? index.get(token) : settings.unk));
  ids.push(settings.eos);
  const row = ids.slice(0, settings.num_steps);
  while (row.length < settings.num_steps) row.push(settings.pad);
  const validLen = row.filter((id) => id !== settings.pad).length;
  const words = tokens.filter((token) => !isPunctuation(token));
  return {
    sentence: String(sentence),
    tokens,
    row,
    validLen,
    // something to translate: a word (not punctuation) in the vocabulary
    translatable: words.some((token) => index.has(token)),
    punctuationOnly: words.length === 0,
    unknown: tokens.filter((token) => !index.has(token)),
    dropped: tokens.slice(settings.num_steps),
    eosDropped: ids.length > settings.num_steps,
  };
}

const indexes = new WeakMap();
function vocabIndex(settings) {
  if (!indexes.has(settings)) {
    indexes.set(settings, new Map(settings.src_vocab.map((token, i) => [token, i])));
  }
  return indexes.get(settings);
}

// --- The download ---------------------------------------------------------------------

/** What the build measured (book/_ext/site_assets.py), from the page: for each file
 * under _static its size (`bytes`), the bytes that travel (`sent`) and whether a
 * gzipped copy NAME.gz is fetched instead (`packed`); `sent` in all. Null if absent. */
function readDownload() {
  const mark = document.querySelector('.translator-download-size[data-download]');
  try {
    return mark ? JSON.parse(mark.dataset.download) : null;
  } catch {
    return null;
  }
}

const download = readDownload();
const canUnpack = typeof DecompressionStream === 'function';
const arrived = new Map(); // path under _static -> bytes that have travelled
let onProgress = () => {};

function noteArrived(path, sent) {
  arrived.set(path, sent);
  onProgress();
}

/** Bytes of the download that have arrived, and its total (as the build measured it;
 * files it did not list count as they arrive). */
function downloaded() {
  let sent = 0;
  for (const bytes of arrived.values()) sent += bytes;
  let total = download ? download.sent : 0;
  for (const path of arrived.keys()) {
    if (!download || !download.files[path]) total += arrived.get(path);
  }
  return {sent: Math.min(sent, total), total: Math.max(total, sent)};
}

async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The bytes of a file under _static, read as they arrive. A packed file comes as its
 * gzipped copy (kept as it is by GitHub Pages, which does not compress .gz or .onnx
 * files) and is unpacked here. A server may also compress on the way: the body then
 * comes unpacked, Content-Length (if sent at all) counts the packed bytes, and the
 * progress counts the body at the build's ratio of packed to unpacked size. */
async function fetchFile(path, nearlyDone = () => {}) {
  const info = download && download.files[path];
  const packed = Boolean(info && info.packed && canUnpack);
  const response = await fetch(new URL(packed ? `${path}.gz` : path, HERE));
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  const ratio = info && !packed && info.bytes ? info.sent / info.bytes : 1;
  const limit = info ? info.sent : Infinity;
  const chunks = [];
  let length = 0;
  if (response.body && response.body.getReader) {
    const reader = response.body.getReader();
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      chunks.push(value);
      length += value.length;
      const sent = Math.min(Math.round(length * ratio), limit);
      noteArrived(path, sent);
      if (limit - sent < NEARLY_DONE) nearlyDone();
    }
  } else {
    chunks.push(new Uint8Array(await response.arrayBuffer()));
    length = chunks[0].length;
  }
  noteArrived(path, info ? info.sent : length);
  nearlyDone();
  let bytes = chunks.length === 1 ? chunks[0] : new Uint8Array(length);
  if (chunks.length !== 1) {
    let offset = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
  }
  // gzip's magic number: an ONNX file starts with 0x08, WebAssembly with 0x00
  if (packed && bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = await gunzip(bytes);
  return bytes;
}

/** Fetch the files one after the other, each asked for when the one before it has
 * NEARLY_DONE bytes left (or, for the first, once `after` resolves): one download at a
 * time finishes each file early, and the overlap keeps the link busy. */
function fetchInTurn(paths, after) {
  let turn = after;
  return paths.map((path) => {
    let next;
    const nextTurn = new Promise((resolve) => {
      next = resolve;
    });
    const bytes = turn.then(() => fetchFile(path, next));
    bytes.catch(() => next());
    turn = nextTurn;
    return bytes;
  });
}

async function fetchJson(path) {
  return JSON.parse(new TextDecoder().decode(await fetchFile(path)));
}

// --- The model ------------------------------------------------------------------------

class PositionError extends Error {}

let ort = null;
let model = null; // {settings, provenance, encoder, step}
const timeline = {}; // ms since navigation at which each part of the load was done

function mark(name) {
  timeline[name] = performance.now();
}

/** Load everything, one large file at a time: the WebAssembly runtime, then the
 * decoder step, then the encoder (the smallest, so that little is left to do once it
 * is in). The runtime starts, with the decoder step's session, while the encoder
 * downloads. onSettings(settings) runs as soon as the small
 * settings file is in, onDownloaded() once the last file is. */
async function loadModel(onSettings, onDownloaded) {
  noteArrived('translator.js', download?.files['translator.js']?.sent ?? 0);
  const ortModule = import(new URL(ORT_MODULE, HERE).href).then((module) => {
    noteArrived(ORT_MODULE, download?.files[ORT_MODULE]?.sent ?? 0);
    return module;
  });
  // onnxruntime imports its glue code when it starts the runtime: ask for it now.
  import(new URL(ORT_GLUE, HERE).href).then(
    () => noteArrived(ORT_GLUE, download?.files[ORT_GLUE]?.sent ?? 0), () => {});
  let wasmNearlyDone;
  const wasmTurn = new Promise((resolve) => {
    wasmNearlyDone = resolve;
  });
  const wasm = fetchFile(ORT_WASM, wasmNearlyDone);
  wasm.catch(() => wasmNearlyDone());
  const settings = await fetchJson('translator/translator.json');
  mark('settings');
  onSettings(settings);
  const [stepBytes, encoderBytes] = fetchInTurn(
    [`translator/${settings.decoder_step}`, `translator/${settings.encoder}`], wasmTurn);
  const provenance = fetchJson('translator/provenance.json').catch(() => null);
  ort = await ortModule;
  ort.env.wasm.wasmPaths = ORT_DIR.href;
  ort.env.wasm.numThreads = 1; // no SharedArrayBuffer without cross-origin isolation
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';
  ort.env.wasm.wasmBinary = await wasm;
  mark('runtime downloaded');
  const stepProgram = await stepBytes;
  mark('decoder downloaded');
  const options = {executionProviders: ['wasm'], graphOptimizationLevel: 'all'};
  const step = await ort.InferenceSession.create(stepProgram, options);
  mark('runtime and decoder started');
  const encoderProgram = await encoderBytes;
  mark('encoder downloaded');
  onDownloaded();
  const encoder = await ort.InferenceSession.create(encoderProgram, options);
  mark('encoder started');
  model = {settings, provenance: await provenance, encoder, step};
  return model;
}

function int64(values, dims) {
  return new ort.Tensor('int64', BigInt64Array.from(values, (v) => BigInt(v)), dims);
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

/** Greedy decoding (decoding.greedy_decode) of one encoded sentence: the encoder once,
 * then the cached decoder step until <eos> or max_output steps. onStep(result) is
 * awaited after every step. */
async function decode(encoded, {maxLen, onStep} = {}) {
  const {settings, encoder, step} = model;
  maxLen = maxLen ?? settings.max_len;
  const S = encoded.row.length;
  let problem = checkPositions('src', S, 0, maxLen);
  if (problem) throw new PositionError(problem);
  const lens = int64([encoded.validLen], [1]);
  const encoderOut = await encoder.run({src: int64(encoded.row, [1, S]), src_valid_lens: lens});
  const memory = {};
  for (const name of settings.step_inputs) {
    if (name.startsWith('memory_')) memory[name] = encoderOut[name];
  }
  const cache = {};
  for (const name of settings.step_inputs) {
    if (!name.startsWith('cache_')) continue;
    const [, heads, , headDim] = memory[name.replace('cache_', 'memory_')].dims;
    cache[name] = new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, headDim]);
  }
  const result = {
    encoded,
    output: [],
    cross: [], // cross[step][layer]: Float32Array (H * S), one row per head
    self: Array.from({length: settings.num_layers},
      (_, layer) => encoderOut[`self_weights${layer}`].data),
    steps: 0,
  };
  let token = settings.bos;
  for (let t = 0; t < settings.max_output; t++) {
    problem = checkPositions('tgt_input', 1, t, maxLen);
    if (problem) throw new PositionError(problem);
    const feeds = {
      token: int64([token], [1, 1]),
      enc_outputs: encoderOut.enc_outputs,
      src_valid_lens: lens,
      ...cache,
      ...memory,
    };
    const out = await step.run(feeds);
    token = argmax(out.logits.data);
    result.cross.push(Array.from({length: settings.num_layers},
      (_, layer) => out[`cross_weights${layer}`].data));
    for (const name of Object.keys(cache)) cache[name] = out[`new_${name}`];
    result.steps = t + 1;
    if (token === settings.eos) break;
    result.output.push(settings.tgt_vocab[token]);
    if (onStep) await onStep(result);
  }
  return result;
}

// --- Heat maps ------------------------------------------------------------------------

// Viridis, sampled at 0, 0.25, 0.5, 0.75, 1: readable on light and dark pages.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function colour(value) {
  const x = Math.min(Math.max(value, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  const rgb = VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
  return `rgb(${rgb.join(',')})`;
}

function svgElement(name, attributes = {}, text = null) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== null) element.textContent = text;
  return element;
}

function clip(label, size = 14) {
  const chars = Array.from(label);
  return chars.length > size ? `${chars.slice(0, size - 1).join('')}…` : label;
}

/** An SVG heat map: weights[r][c] for row labels (queries) and column labels (keys),
 * each cell with a <title> tooltip. */
function heatMap(weights, rows, columns, {title, rowName, columnName}) {
  const cell = 34;
  const font = 13;
  const charWidth = 8.4; // a generous average for a 13 px sans-serif
  const rowLabels = rows.map((label) => clip(label));
  const columnLabels = columns.map((label) => clip(label));
  const length = (label) => Array.from(label).length * charWidth;
  const left = 12 + Math.max(3 * charWidth, ...rowLabels.map(length));
  // Column labels run up and to the right at 45 degrees from their column's middle.
  const slant = columnLabels.map((label) => Math.SQRT1_2 * length(label));
  const top = 12 + Math.max(3 * charWidth, ...slant);
  const width = Math.ceil(Math.max(left + cell * columns.length + 2,
    ...slant.map((run, c) => left + cell * (c + 0.5) + run + 8)));
  const height = Math.ceil(top + cell * rows.length + 4);
  const svg = svgElement('svg', {
    viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    class: 'translator-heatmap',
  });
  svg.append(svgElement('title', {}, title));
  columnLabels.forEach((label, c) => {
    const x = left + cell * (c + 0.5) + font / 3;
    const y = top - 6;
    svg.append(svgElement('text', {
      x, y, 'font-size': font, transform: `rotate(-45 ${x} ${y})`, class: 'label',
    }, label));
  });
  rowLabels.forEach((label, r) => {
    svg.append(svgElement('text', {
      x: left - 6, y: top + cell * (r + 0.5) + font / 3, 'font-size': font,
      'text-anchor': 'end', class: 'label',
    }, label));
  });
  weights.forEach((row, r) => {
    row.forEach((value, c) => {
      const rect = svgElement('rect', {
        x: left + cell * c, y: top + cell * r, width: cell - 1, height: cell - 1,
        fill: colour(value), 'data-weight': value.toFixed(6),
      });
      rect.append(svgElement('title', {},
        `${rowName} “${rows[r]}” → ${columnName} “${columns[c]}”: ${value.toFixed(3)}`));
      svg.append(rect);
    });
  });
  return svg;
}

// --- The page -------------------------------------------------------------------------

function byId(id) {
  return document.getElementById(id);
}

function setText(id, text) {
  const element = byId(id);
  if (element) element.textContent = text;
}

function fillSelect(select, options, selected) {
  select.replaceChildren(...options.map(([value, label]) => {
    const option = document.createElement('option');
    option.value = value;
    option.textContent = label;
    return option;
  }));
  select.value = selected;
}

function sourceLabels(result) {
  const {settings} = model;
  const labels = [];
  for (let i = 0; i < result.encoded.validLen; i++) {
    labels.push(settings.src_vocab[result.encoded.row[i]]);
  }
  return labels;
}

function quote(sentence, size = 60) {
  return `“${clip(sentence.trim(), size)}”`;
}

/** The tokens the model reads, one chip each (unknown words marked), and notes on
 * unknown words, cut sentences and sentences left out. */
function showSource(encodedList, leftOut) {
  const {settings} = model;
  const chips = [];
  const notes = [];
  const several = encodedList.length > 1;
  encodedList.forEach((encoded, s) => {
    encoded.row.slice(0, encoded.validLen).forEach((id, i) => {
      const chip = document.createElement('span');
      chip.className = 'translator-token';
      if (s > 0 && i === 0) chip.classList.add('sentence-start');
      chip.textContent = settings.src_vocab[id];
      if (id === settings.unk && i < encoded.tokens.length) {
        chip.classList.add('unknown');
        chip.title = `“${encoded.tokens[i]}” is not in the model's vocabulary`;
      }
      chips.push(chip);
    });
    const which = several ? `Sentence ${s + 1}: ` : '';
    if (encoded.dropped.length) {
      const shown = encoded.dropped.slice(0, 12).map((t) => clip(t, 30)).join(' ');
      const more = encoded.dropped.length > 12 ? ` … (${encoded.dropped.length} in all)` : '';
      notes.push(`${which}the model reads at most ${settings.num_steps} tokens, <eos>`
        + ` included; left out: “${shown}”${more} and <eos>.`);
    } else if (encoded.eosDropped) {
      notes.push(`${which}the model reads at most ${settings.num_steps} tokens: the`
        + ' end-of-sentence token <eos> did not fit and was left out.');
    }
  });
  byId('translator-source').replaceChildren(...chips);
  const unknown = [...new Set(encodedList.flatMap((encoded) => encoded.unknown))];
  if (unknown.length) {
    notes.unshift(`Not in the model's English vocabulary (read as <unk>): ${
      unknown.map((t) => clip(t, 30)).join(', ')}.`);
  }
  if (several) {
    notes.unshift(`Read as ${encodedList.length} sentences, each translated on its own.`);
  }
  encodedList.forEach((encoded, s) => {
    if (encoded.translatable || !several) return;
    const why = encoded.punctuationOnly ? 'it has no word'
      : 'none of its words is in the vocabulary';
    notes.push(`Sentence ${s + 1}, ${quote(encoded.sentence)}, is not translated: ${why}.`);
  });
  if (leftOut.length) {
    notes.push(`The page translates at most ${MAX_SENTENCES} sentences at a time; left`
      + ` out: ${quote(leftOut.join(' '), 80)}.`);
  }
  setText('translator-note', notes.join(' '));
}

/** The French words, <unk> marked as the unknown English words are, and a note on it. */
function showOutput(words) {
  const {settings} = model;
  const unk = settings.tgt_vocab[settings.unk];
  const nodes = [];
  words.forEach((word, i) => {
    if (i > 0) nodes.push(document.createTextNode(' '));
    if (word === unk) {
      const chip = document.createElement('span');
      chip.className = 'translator-token unknown';
      chip.textContent = word;
      chip.title = 'A French word the model cannot spell out (see the note below)';
      nodes.push(chip);
    } else {
      nodes.push(document.createTextNode(word));
    }
  });
  byId('translator-output').replaceChildren(...nodes);
  setText('translator-output-note', words.includes(unk)
    ? `${unk} in the French stands for a word the model never learned to write: in its`
      + ' training data every French word seen fewer than twice was replaced by'
      + ` ${unk}, so where such a word belongs, the model writes ${unk}.`
    : '');
}

function drawCross(result) {
  const {settings} = model;
  const layer = Number(byId('translator-cross-layer').value);
  const head = byId('translator-cross-head').value;
  const columns = sourceLabels(result);
  const S = result.encoded.row.length;
  const H = settings.num_heads;
  const steps = Math.max(result.output.length, result.cross.length ? 1 : 0);
  const rows = result.output.length ? result.output : ['<eos>'];
  const weights = [];
  for (let t = 0; t < steps; t++) {
    const data = result.cross[t][layer]; // (H, 1, S) flattened
    weights.push(columns.map((_, c) => {
      if (head !== 'mean') return data[Number(head) * S + c];
      let sum = 0;
      for (let h = 0; h < H; h++) sum += data[h * S + c];
      return sum / H;
    }));
  }
  const which = head === 'mean' ? 'average of the heads' : `head ${Number(head) + 1}`;
  const svg = heatMap(weights, rows.slice(0, steps), columns, {
    title: `Cross-attention, layer ${layer + 1}, ${which}: French words (rows) attending`
      + ' to English tokens (columns)',
    rowName: 'output', columnName: 'source',
  });
  const box = byId('translator-cross');
  box.replaceChildren(svg);
  box.dataset.view = `${layer}:${head}`;
}

function drawSelf(result) {
  const layer = Number(byId('translator-self-layer').value);
  const head = Number(byId('translator-self-head').value);
  const labels = sourceLabels(result);
  const S = result.encoded.row.length;
  const data = result.self[layer]; // (H, S, S) flattened
  const weights = labels.map((_, r) => labels.map((__, c) => data[(head * S + r) * S + c]));
  const svg = heatMap(weights, labels, labels, {
    title: `Encoder self-attention, layer ${layer + 1}, head ${head + 1}: English tokens`
      + ' (rows) attending to English tokens (columns)',
    rowName: 'query', columnName: 'key',
  });
  const box = byId('translator-self');
  box.replaceChildren(svg);
  box.dataset.view = `${layer}:${head}`;
}

let last = null; // the last translation's sentences, redrawn when a selector changes
let queue = Promise.resolve();

/** The translated sentence whose heat maps are shown. */
function shown() {
  if (!last || !last.length) return null;
  const choice = Number(byId('translator-sentence').value);
  return last[Number.isInteger(choice) && choice < last.length ? choice : 0];
}

function showSentenceChoice(results) {
  const select = byId('translator-sentence');
  const several = results.length > 1;
  byId('translator-sentence-choice').hidden = !several;
  fillSelect(select, results.map((result, s) => [s,
    `${s + 1}: ${clip(result.encoded.sentence.trim(), 40)}`]), 0);
}

function nextFrame() {
  // Let the browser paint the new word: a message-channel task yields without the
  // 4 ms clamp of nested timers or waiting a whole frame when the page is not drawn.
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/** Translate `text` on the page, sentence by sentence; resolves to what the page shows.
 * Runs one at a time, and only once the model is loaded. options.maxLen replaces the
 * model's max_len (to show its check). */
function translate(text, options = {}) {
  const run = queue.then(() => translateNow(String(text ?? ''), options)).then(
    (result) => {
      page.count += 1; // finished translations, for whoever waits for the next one
      page.last = result;
      return result;
    });
  queue = run.catch(() => {});
  return run;
}

async function translateNow(text, options) {
  const root = byId('translator');
  const {settings} = model;
  const pieces = splitSentences(text).map((sentence) => encode(settings, sentence));
  const encodedList = pieces.slice(0, MAX_SENTENCES);
  const leftOut = pieces.slice(MAX_SENTENCES).map((encoded) => encoded.sentence.trim());
  root.dataset.state = 'busy';
  showOutput([]);
  setText('translator-time', '');
  setText('translator-note', '');
  byId('translator-source').replaceChildren();
  byId('translator-sentence-choice').hidden = true;
  const done = (state, message) => {
    setText('translator-status', message);
    root.dataset.state = state;
    byId('translator-go').disabled = false;
    const output = last ? last.flatMap((result) => result.output).join(' ') : '';
    return {state, message, output};
  };
  const refuse = (state, message) => {
    last = null;
    clearMaps();
    return done(state, message);
  };
  byId('translator-go').disabled = true;
  if (encodedList.length === 0) return refuse('empty', 'Type an English sentence first.');
  showSource(encodedList, leftOut);
  const runnable = encodedList.filter((encoded) => encoded.translatable);
  if (runnable.length === 0) {
    if (encodedList.every((encoded) => encoded.punctuationOnly)) {
      return refuse('empty', 'Type an English sentence first: punctuation alone has'
        + ' nothing to translate.');
    }
    return refuse('unknown', 'None of these words is in the model\'s English vocabulary,'
      + ' so there is nothing to translate; try a short everyday sentence.');
  }
  setText('translator-status', 'Translating…');
  const started = performance.now();
  const results = [];
  try {
    for (const encoded of runnable) {
      const before = results.flatMap((result) => result.output);
      results.push(await decode(encoded, {
        maxLen: options.maxLen,
        onStep: async (partial) => {
          last = [...results, partial];
          showOutput([...before, ...partial.output]);
          if (results.length === 0) drawCross(partial);
          await nextFrame();
        },
      }));
    }
  } catch (error) {
    if (error instanceof PositionError) return refuse('error', error.message);
    console.warn(error);
    return refuse('error', `The model could not run: ${error.message ?? error}`);
  }
  last = results;
  const seconds = (performance.now() - started) / 1000;
  showOutput(results.flatMap((result) => result.output));
  showSentenceChoice(results);
  drawCross(shown());
  drawSelf(shown());
  const steps = results.reduce((sum, result) => sum + result.steps, 0);
  const stepText = steps === 1 ? '1 decoder step' : `${steps} decoder steps`;
  const work = results.length === 1 ? `the encoder once, then ${stepText}`
    : `${results.length} sentences, the encoder once for each, then ${stepText} in all`;
  setText('translator-time', `Translated in ${Math.round(seconds * 1000)} ms on this`
    + ` device's CPU: ${work}.`);
  const empty = results.every((result) => result.output.length === 0);
  const loaded = `Ready (the model loaded in ${(page.loadMs / 1000).toFixed(1)} s).`;
  const result = done('done', empty ? 'The model answered <eos> at once: an empty'
    + ' translation.' : loaded);
  result.ms = seconds * 1000;
  result.sentences = results.length;
  return result;
}

function clearMaps() {
  for (const id of ['translator-cross', 'translator-self']) {
    const box = byId(id);
    box.replaceChildren();
    delete box.dataset.view;
  }
}

/** The controls work from the start: a sentence asked for before the model is ready
 * is translated as soon as it is (the last one asked for, in place of the page's). */
let pending = null;

function request(sentence) {
  byId('translator-input').value = sentence;
  if (model) return translate(sentence);
  pending = sentence;
  showLoading();
  return page.ready;
}

function setUpControls() {
  for (const id of ['translator-cross-layer', 'translator-cross-head']) {
    byId(id).addEventListener('change', () => shown() && drawCross(shown()));
  }
  for (const id of ['translator-self-layer', 'translator-self-head']) {
    byId(id).addEventListener('change', () => shown() && drawSelf(shown()));
  }
  byId('translator-sentence').addEventListener('change', () => {
    if (!shown()) return;
    drawCross(shown());
    drawSelf(shown());
  });
  byId('translator-form').addEventListener('submit', (event) => {
    event.preventDefault();
    request(byId('translator-input').value).catch(() => {});
  });
  for (const button of document.querySelectorAll('#translator [data-example]')) {
    button.addEventListener('click', () => request(button.dataset.example).catch(() => {}));
  }
  byId('translator-go').disabled = false;
}

/** The selectors, filled as soon as the model's settings are in (before its weights). */
function fillSelectors(settings) {
  const layers = Array.from({length: settings.num_layers}, (_, l) => [l, `Layer ${l + 1}`]);
  const heads = Array.from({length: settings.num_heads}, (_, h) => [h, `Head ${h + 1}`]);
  fillSelect(byId('translator-cross-layer'), layers, settings.num_layers - 1);
  fillSelect(byId('translator-cross-head'), [['mean', 'Average of the heads'], ...heads],
    'mean');
  fillSelect(byId('translator-self-layer'), layers, 0);
  fillSelect(byId('translator-self-head'), heads, 0);
  for (const id of ['translator-cross-layer', 'translator-cross-head',
    'translator-self-layer', 'translator-self-head']) {
    byId(id).disabled = false;
  }
}

function megabytes(bytes) {
  return `${(bytes / 1e6).toFixed(1)}\u00a0MB`; // kept on one line
}

let loadingPhase = 'download';

function showLoading() {
  if (model) return;
  const bar = byId('translator-progress');
  const {sent, total} = downloaded();
  let text;
  if (loadingPhase === 'download' && total > 0) {
    if (bar) {
      bar.max = total;
      bar.value = sent;
    }
    text = `Downloading the model and its runtime: ${megabytes(sent)} of`
      + ` ${megabytes(total)}.`;
  } else if (loadingPhase === 'download') {
    text = 'Downloading the model and its runtime…';
  } else {
    if (bar) bar.value = bar.max;
    text = 'Starting the model…';
  }
  if (pending !== null) {
    text += ` Your sentence will be translated as soon as the model is ready.`;
  }
  setText('translator-status', text);
}

function showProvenance(provenance) {
  if (!provenance || typeof provenance.test_bleu_shipped !== 'number') return;
  const parts = [`This model scores BLEU ${provenance.test_bleu_shipped.toFixed(1)}`];
  if (provenance.num_test) parts.push(` on ${provenance.num_test} held-out test sentences, decoding greedily`);
  if (provenance.batches) parts.push(`, after ${provenance.batches} training minibatches`);
  setText('translator-provenance', `${parts.join('')}.`);
}

async function start() {
  const root = byId('translator');
  if (!root) throw new Error('no #translator element on this page');
  root.dataset.state = 'loading';
  setUpControls();
  let lastShown = 0;
  onProgress = () => {
    const now = performance.now();
    if (now - lastShown < 50) return; // at most 20 updates a second
    lastShown = now;
    showLoading();
  };
  showLoading();
  const started = performance.now();
  try {
    await loadModel(fillSelectors, () => {
      loadingPhase = 'start';
      showLoading();
    });
  } catch (error) {
    root.dataset.state = 'failed';
    setText('translator-status', `The model could not be loaded: ${error.message ?? error}`);
    throw error;
  }
  page.loadedAt = performance.now(); // ms since navigation started
  page.loadMs = page.loadedAt - started;
  const bar = byId('translator-progress');
  if (bar) bar.hidden = true;
  showProvenance(model.provenance);
  setText('translator-status', `Model loaded in ${(page.loadMs / 1000).toFixed(1)} s.`);
}

const page = {
  preprocess, tokenize, splitSentences, checkPositions, translate, count: 0, last: null,
  download, downloaded, timeline,
};
page.encode = (sentence) => encode(model.settings, sentence);
page.settings = () => model && model.settings;
window.translatorPage = page;
// loaded: the model is ready; ready: the first text is translated too (the input's, or
// the last one the reader asked for while the model loaded).
page.loaded = start();
queue = page.loaded;
page.ready = page.loaded.then(() => translate(pending ?? byId('translator-input').value))
  .then((first) => {
    page.firstTranslationAt = performance.now();
    return first;
  });
page.ready.catch(() => {});
