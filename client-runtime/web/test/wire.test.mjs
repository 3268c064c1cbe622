// The runtime's wire types against the server's OpenAPI document
// (`openapi.json` here, which a server test keeps equal to what
// `/v1/openapi.json` serves). Each TypeScript interface below describes one
// schema of the document; their field names must agree, at every level of
// an inline object type, so that renaming a field on either side fails here.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import ts from 'typescript';

const doc = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8'));

// [file, interface, schema, how]: `exact` (the same fields) or `subset`
// (the client reads only some of the answer's fields).
const PAIRS = [
  ['types.ts', 'BestResponse', 'BestResponse', 'exact'],
  ['types.ts', 'Candidate', 'CandidateEvent', 'exact'],
  ['types.ts', 'ReportRequest', 'ReportRequest', 'exact'],
  ['types.ts', 'ReportEntry', 'ReportEntry', 'exact'],
  ['reports.ts', 'ReportBatch', 'ReportBatch', 'exact'],
  ['reports.ts', 'ReportBatchResponse', 'ReportBatchResponse', 'exact'],
  ['reports.ts', 'ReportResult', 'ReportResult', 'exact'],
  ['webtune.ts', 'SessionInfo', 'SessionResponse', 'exact'],
  ['latency.ts', 'LatencyReport', 'LatencyRequest', 'exact'],
  ['latency.ts', 'PlanAnswer', 'PlanResponse', 'subset'],
  ['rho.ts', 'RhoResponse', 'RhoResponse', 'exact'],
  ['encoder.ts', 'ModelManifest', 'Manifest', 'exact'],
  ['encoder.ts', 'ModelConfig', 'BertConfig', 'exact'],
  ['encoder.ts', 'Blob', 'BlobRef', 'exact'],
];

/** A schema with references followed, `T | null` unwrapped and arrays replaced by their items. */
function resolve(s) {
  for (;;) {
    const alts = (s.oneOf ?? s.anyOf)?.filter((a) => a.type !== 'null');
    if (s.$ref) s = doc.components.schemas[s.$ref.split('/').pop()];
    else if (alts?.length === 1) s = alts[0];
    else if (s.items) s = s.items;
    else return s;
  }
}

/** A type node with arrays, parentheses and `| null` / `| undefined` taken off. */
function bare(t) {
  for (;;) {
    if (ts.isArrayTypeNode(t)) t = t.elementType;
    else if (ts.isParenthesizedTypeNode(t)) t = t.type;
    else if (ts.isUnionTypeNode(t)) {
      const rest = t.types.filter((u) => !(ts.isLiteralTypeNode(u) && u.literal.kind === ts.SyntaxKind.NullKeyword) && u.kind !== ts.SyntaxKind.UndefinedKeyword);
      if (rest.length !== 1) return t;
      t = rest[0];
    } else return t;
  }
}

function interfaceMembers(file, name) {
  const src = ts.createSourceFile(file, readFileSync(new URL(`../src/${file}`, import.meta.url), 'utf8'), ts.ScriptTarget.Latest, true);
  const decl = src.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === name);
  assert.ok(decl, `src/${file} has no interface ${name}`);
  return decl.members;
}

/** Differences between TypeScript members and a schema's properties, inline object types included. */
function compare(members, schema, at, how) {
  const props = resolve(schema).properties ?? {};
  const mine = members.filter(ts.isPropertySignature);
  const names = new Set(mine.map((m) => m.name.getText()));
  const out = [];
  for (const n of names) if (!(n in props)) out.push(`${at}.${n} is not in the document`);
  if (how === 'exact') for (const n of Object.keys(props)) if (!names.has(n)) out.push(`${at}.${n} is in the document, not in the TypeScript type`);
  for (const m of mine) {
    const t = m.type && bare(m.type);
    const n = m.name.getText();
    if (t && ts.isTypeLiteralNode(t) && props[n]) out.push(...compare(t.members, props[n], `${at}.${n}`, 'exact'));
  }
  return out;
}

for (const [file, iface, schema, how] of PAIRS) {
  test(`${iface} (src/${file}) matches the schema ${schema}`, () => {
    assert.ok(doc.components.schemas[schema], `the document has no schema ${schema}`);
    assert.deepEqual(compare(interfaceMembers(file, iface), { $ref: `#/components/schemas/${schema}` }, iface, how), []);
  });
}
