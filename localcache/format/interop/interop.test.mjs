// Reads a snapshot written by the Go cook (localcache/format) with the
// Apache Arrow JavaScript implementation and checks it against the rows
// the Go side expects, written independently as CSV.
//
//   ES_SNAPSHOT_DIR  the snapshot directory (data.arrow, index.arrow, manifest.json)
//   ES_EXPECTED_CSV  series_id,period,value rows: period ISO (YYYY-MM-DD for
//                    date32 snapshots, YYYY-MM-DDTHH:MM:SSZ for timestamp ones)
//
// Run by TestInteropArrowJS; by hand: ES_SNAPSHOT_DIR=... ES_EXPECTED_CSV=... node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tableFromIPC, DataType, DateUnit, TimeUnit, Precision } from 'apache-arrow';

const dir = process.env.ES_SNAPSHOT_DIR;
const csvPath = process.env.ES_EXPECTED_CSV;
if (!dir || !csvPath) {
  throw new Error('set ES_SNAPSHOT_DIR and ES_EXPECTED_CSV');
}

// RFC 4180 CSV, as Go's encoding/csv writes it (quotes, doubled quotes,
// newlines inside quotes).
function parseCSV(text) {
  const rows = [];
  let row = [], field = '', quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field); rows.push(row); row = []; field = '';
    } else field += c;
  }
  if (field !== '' || row.length > 0) { row.push(field); rows.push(row); }
  return rows;
}

const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
const timestamps = manifest.period_type === 'timestamp[s, UTC]';
const data = tableFromIPC(readFileSync(join(dir, 'data.arrow')));
const index = tableFromIPC(readFileSync(join(dir, 'index.arrow')));
const [header, ...expected] = parseCSV(readFileSync(csvPath, 'utf8'));

// iso renders a period given as milliseconds (what apache-arrow returns for
// date32 and timestamp[s]) the way the Go side wrote it.
function iso(ms) {
  const s = new Date(ms).toISOString();
  return timestamps ? s.replace('.000Z', 'Z') : s.slice(0, 10);
}

// raw reads the stored integer of a period column (days or seconds),
// independently of apache-arrow's conversion to milliseconds.
function rawISO(vector, i) {
  const v = vector.data[0].values[vector.data[0].offset + i];
  return iso(timestamps ? Number(v) * 1000 : v * 86400000);
}

function meta(schema) {
  return Object.fromEntries(schema.metadata);
}

test('expected CSV is well formed', () => {
  assert.deepEqual(header, ['series_id', 'period', 'value']);
  assert.ok(expected.length > 0);
});

test('schemas: types, no nulls, file kind and version', () => {
  const periodOK = (t) => timestamps
    ? DataType.isTimestamp(t) && t.unit === TimeUnit.SECOND && t.timezone === 'UTC'
    : DataType.isDate(t) && t.unit === DateUnit.DAY;
  const u32 = (t) => DataType.isInt(t) && !t.isSigned && t.bitWidth === 32;
  const f64 = (t) => DataType.isFloat(t) && t.precision === Precision.DOUBLE;
  const u8 = (t) => DataType.isInt(t) && !t.isSigned && t.bitWidth === 8;
  const str = (t) => DataType.isUtf8(t);

  assert.deepEqual(meta(data.schema), { 'energyscope.file': 'data', 'energyscope.version': '1' });
  assert.deepEqual(data.schema.fields.map((f) => f.name), ['series', 'period', 'value']);
  assert.ok(u32(data.schema.fields[0].type) && periodOK(data.schema.fields[1].type) && f64(data.schema.fields[2].type),
    data.schema.fields.map((f) => String(f.type)).join());

  assert.deepEqual(meta(index.schema), { 'energyscope.file': 'index', 'energyscope.version': '1' });
  const want = [['series_id', str], ['batch', u32], ['offset', u32], ['length', u32], ['first_period', periodOK],
    ['last_period', periodOK], ['latest_value', f64], ['frequency', str], ['unit', str], ['name', str],
    ['source', str], ['tier', u8]];
  assert.deepEqual(index.schema.fields.map((f) => f.name), want.map(([n]) => n));
  want.forEach(([n, ok], i) => assert.ok(ok(index.schema.fields[i].type), `${n}: ${index.schema.fields[i].type}`));

  for (const t of [data, index]) {
    for (const b of t.batches) {
      for (const f of t.schema.fields) assert.equal(b.getChild(f.name).nullCount, 0, f.name);
    }
  }
  assert.equal(index.batches.length, 1, 'index.arrow is one record batch');
});

test('counts agree with the manifest', () => {
  assert.equal(data.batches.length, manifest.batches);
  assert.equal(data.numRows, manifest.rows);
  assert.equal(index.numRows, manifest.series);
});

test('index: ids strictly increasing by bytes, bounds and latest value match the rows', () => {
  const enc = new TextEncoder();
  const cmp = (a, b) => Buffer.compare(Buffer.from(enc.encode(a)), Buffer.from(enc.encode(b)));
  const ib = index.batches[0];
  const col = (n) => ib.getChild(n);
  for (let r = 0; r < index.numRows; r++) {
    const id = col('series_id').get(r);
    if (r > 0) assert.ok(cmp(col('series_id').get(r - 1), id) < 0, `ids not sorted at row ${r}`);
    const n = col('length').get(r);
    if (n === 0) {
      assert.ok(Number.isNaN(col('latest_value').get(r)), `${id}: empty series with a latest value`);
      continue;
    }
    const b = data.batches[col('batch').get(r)];
    assert.ok(b, `${id}: batch ${col('batch').get(r)} missing`);
    const off = col('offset').get(r);
    assert.ok(off + n <= b.numRows, `${id}: rows outside its batch`);
    const period = b.getChild('period');
    assert.equal(iso(col('first_period').get(r)), iso(period.get(off)), `${id}: first_period`);
    assert.equal(iso(col('last_period').get(r)), iso(period.get(off + n - 1)), `${id}: last_period`);
    assert.equal(col('latest_value').get(r), b.getChild('value').get(off + n - 1), `${id}: latest_value`);
    assert.ok(['H', 'D', 'W', 'M', 'Q', 'A'].includes(col('frequency').get(r)), `${id}: frequency`);
    assert.equal(col('tier').get(r), 0);
  }
});

test('rows match the expected CSV, series by series, in order', () => {
  const ib = index.batches[0];
  const got = [];
  for (let r = 0; r < index.numRows; r++) {
    const id = ib.getChild('series_id').get(r);
    const n = ib.getChild('length').get(r);
    const b = data.batches[ib.getChild('batch').get(r)];
    const off = ib.getChild('offset').get(r);
    for (let i = off; i < off + n; i++) {
      assert.equal(b.getChild('series').get(i), r, `${id}: row ${i} of its batch belongs to series ${b.getChild('series').get(i)}`);
      const p = iso(b.getChild('period').get(i));
      assert.equal(rawISO(b.getChild('period'), i), p, `${id}: stored period and apache-arrow's reading disagree`);
      got.push([id, p, b.getChild('value').get(i)]);
    }
  }
  // Every data row is reached through the index exactly once.
  assert.equal(got.length, data.numRows);
  const want = expected.map(([id, p, v]) => [id, p, parseFloat(v)]);
  assert.equal(got.length, want.length, 'row count');
  for (let k = 0; k < want.length; k++) {
    assert.deepEqual(got[k], want[k], `row ${k}`);
  }
});
