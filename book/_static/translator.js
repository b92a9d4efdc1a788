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

const HERE = new URL('.', import.meta.url);
const MODEL_DIR = new URL('translator/', HERE);
const ORT_DIR = new URL('vendor/onnxruntime-web/', HERE);
const SVG = 'http://www.w3.org/2000/svg';

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
  return {
    tokens,
    row,
    validLen,
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

// --- The model ------------------------------------------------------------------------

class PositionError extends Error {}

let ort = null;
let model = null; // {settings, provenance, encoder, step}

async function fetchBytes(name) {
  const response = await fetch(new URL(name, MODEL_DIR));
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

async function loadModel() {
  ort = await import(new URL('ort.wasm.min.mjs', ORT_DIR).href);
  ort.env.wasm.wasmPaths = ORT_DIR.href;
  ort.env.wasm.numThreads = 1; // no SharedArrayBuffer without cross-origin isolation
  ort.env.wasm.proxy = false;
  ort.env.logLevel = 'error';
  const settings = JSON.parse(new TextDecoder().decode(await fetchBytes('translator.json')));
  const provenance = await fetch(new URL('provenance.json', MODEL_DIR))
    .then((response) => (response.ok ? response.json() : null))
    .catch(() => null);
  const [encoderBytes, stepBytes] = await Promise.all(
    [settings.encoder, settings.decoder_step].map(fetchBytes));
  const options = {executionProviders: ['wasm'], graphOptimizationLevel: 'all'};
  const encoder = await ort.InferenceSession.create(encoderBytes, options);
  const step = await ort.InferenceSession.create(stepBytes, options);
  model = {settings, provenance, encoder, step};
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

function showSource(encoded) {
  const {settings} = model;
  const box = byId('translator-source');
  const chips = encoded.row.slice(0, encoded.validLen).map((id, i) => {
    const chip = document.createElement('span');
    chip.className = 'translator-token';
    chip.textContent = settings.src_vocab[id];
    if (id === settings.unk && i < encoded.tokens.length) {
      chip.classList.add('unknown');
      chip.title = `“${encoded.tokens[i]}” is not in the model's vocabulary`;
    }
    return chip;
  });
  box.replaceChildren(...chips);
  const notes = [];
  if (encoded.unknown.length) {
    notes.push(`Not in the model's English vocabulary (read as <unk>): ${
      [...new Set(encoded.unknown)].map((t) => clip(t, 30)).join(', ')}.`);
  }
  if (encoded.dropped.length) {
    const shown = encoded.dropped.slice(0, 12).map((t) => clip(t, 30)).join(' ');
    const more = encoded.dropped.length > 12 ? ` … (${encoded.dropped.length} in all)` : '';
    notes.push(`The model reads at most ${settings.num_steps} tokens, <eos> included;`
      + ` left out: “${shown}”${more} and <eos>.`);
  } else if (encoded.eosDropped) {
    notes.push(`The model reads at most ${settings.num_steps} tokens: the end-of-sentence`
      + ' token <eos> did not fit and was left out.');
  }
  setText('translator-note', notes.join(' '));
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

let last = null; // the last translation, redrawn when a selector changes
let queue = Promise.resolve();

function nextFrame() {
  // Let the browser paint the new word: a message-channel task yields without the
  // 4 ms clamp of nested timers or waiting a whole frame when the page is not drawn.
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

/** Translate `sentence` on the page; resolves to what the page shows. Runs one at a
 * time. options.maxLen replaces the model's max_len (to show its check). */
function translate(sentence, options = {}) {
  const run = queue.then(() => translateNow(String(sentence ?? ''), options)).then(
    (result) => {
      page.count += 1; // finished translations, for whoever waits for the next one
      page.last = result;
      return result;
    });
  queue = run.catch(() => {});
  return run;
}

async function translateNow(sentence, options) {
  const root = byId('translator');
  const {settings} = model;
  const encoded = encode(settings, sentence);
  root.dataset.state = 'busy';
  setText('translator-output', '');
  setText('translator-time', '');
  setText('translator-note', '');
  byId('translator-source').replaceChildren();
  const done = (state, message) => {
    setText('translator-status', message);
    root.dataset.state = state;
    byId('translator-go').disabled = false;
    return {state, message, output: last ? last.output.join(' ') : ''};
  };
  byId('translator-go').disabled = true;
  if (encoded.tokens.length === 0) {
    last = null;
    clearMaps();
    return done('empty', 'Type an English sentence first.');
  }
  showSource(encoded);
  if (encoded.unknown.length === encoded.tokens.length) {
    last = null;
    clearMaps();
    return done('unknown', 'None of these words is in the model\'s English vocabulary,'
      + ' so there is nothing to translate; try a short everyday sentence.');
  }
  setText('translator-status', 'Translating…');
  const started = performance.now();
  try {
    last = await decode(encoded, {
      maxLen: options.maxLen,
      onStep: async (partial) => {
        last = partial;
        setText('translator-output', partial.output.join(' '));
        drawCross(partial);
        await nextFrame();
      },
    });
  } catch (error) {
    last = null;
    clearMaps();
    if (error instanceof PositionError) return done('error', error.message);
    console.warn(error);
    return done('error', `The model could not run: ${error.message ?? error}`);
  }
  const seconds = (performance.now() - started) / 1000;
  setText('translator-output', last.output.join(' '));
  drawCross(last);
  drawSelf(last);
  const steps = last.steps === 1 ? '1 decoder step' : `${last.steps} decoder steps`;
  setText('translator-time', `Translated in ${Math.round(seconds * 1000)} ms on this`
    + ` device's CPU: the encoder once, then ${steps}.`);
  const empty = last.output.length === 0;
  const loaded = `Ready (the model loaded in ${(page.loadMs / 1000).toFixed(1)} s).`;
  const result = done('done', empty ? 'The model answered <eos> at once: an empty'
    + ' translation.' : loaded);
  result.ms = seconds * 1000;
  return result;
}

function clearMaps() {
  for (const id of ['translator-cross', 'translator-self']) {
    const box = byId(id);
    box.replaceChildren();
    delete box.dataset.view;
  }
}

function setUpControls(settings) {
  const layers = Array.from({length: settings.num_layers}, (_, l) => [l, `Layer ${l + 1}`]);
  const heads = Array.from({length: settings.num_heads}, (_, h) => [h, `Head ${h + 1}`]);
  fillSelect(byId('translator-cross-layer'), layers, settings.num_layers - 1);
  fillSelect(byId('translator-cross-head'), [['mean', 'Average of the heads'], ...heads],
    'mean');
  fillSelect(byId('translator-self-layer'), layers, 0);
  fillSelect(byId('translator-self-head'), heads, 0);
  for (const id of ['translator-cross-layer', 'translator-cross-head']) {
    byId(id).addEventListener('change', () => last && drawCross(last));
  }
  for (const id of ['translator-self-layer', 'translator-self-head']) {
    byId(id).addEventListener('change', () => last && drawSelf(last));
  }
  byId('translator-form').addEventListener('submit', (event) => {
    event.preventDefault();
    translate(byId('translator-input').value).catch(() => {});
  });
  for (const button of document.querySelectorAll('#translator [data-example]')) {
    button.addEventListener('click', () => {
      byId('translator-input').value = button.dataset.example;
      translate(button.dataset.example).catch(() => {});
    });
  }
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
  setText('translator-status', 'Loading the model…');
  const started = performance.now();
  try {
    await loadModel();
  } catch (error) {
    root.dataset.state = 'failed';
    setText('translator-status', `The model could not be loaded: ${error.message ?? error}`);
    throw error;
  }
  page.loadedAt = performance.now(); // ms since navigation started
  page.loadMs = page.loadedAt - started;
  setUpControls(model.settings);
  showProvenance(model.provenance);
  setText('translator-status', `Model loaded in ${(page.loadMs / 1000).toFixed(1)} s.`);
}

const page = {preprocess, tokenize, checkPositions, translate, count: 0, last: null};
page.encode = (sentence) => encode(model.settings, sentence);
page.settings = () => model && model.settings;
window.translatorPage = page;
// loaded: the model is ready; ready: the first sentence (the input's) is translated too.
page.loaded = start();
queue = page.loaded;
page.ready = page.loaded.then(() => translate(byId('translator-input').value)).then(
  (first) => {
    page.firstTranslationAt = performance.now();
    return first;
  });
page.ready.catch(() => {});
