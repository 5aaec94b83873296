// Parse diagrams with Mermaid's own parser, offline, in plain Node (no browser, no DOM).
//
//   node check.mjs < diagrams.json     a JSON array of diagram texts on stdin
//   node check.mjs FILE...             one diagram per file
//
// Prints one JSON object per diagram, one per line, in input order:
//   {"index", "ok", "diagramType", "error", "nodes": [[id, shape, label]...],
//    "edges": [[from id, to id, label]...]}
// `nodes`/`edges` are what Mermaid's state diagram database holds after the parse, i.e. what it
// would draw: a state's label is its id unless declared `state "label" as id`; the `[*]` start and
// end pseudo-states have shapes `stateStart`/`stateEnd`. They are null unless the diagram is a
// state diagram. ok: parsed without error as Mermaid's diagram type `stateDiagram` (the
// stateDiagram-v2 grammar and database; Mermaid 11 also routes a `stateDiagram` header there).
// Exit 0 only if every diagram is ok; 1 if any isn't; 2 on bad usage.
//
// Mermaid sanitises label text with DOMPurify, which needs a DOM: without one its default export
// lacks addHook/sanitize and every labelled diagram throws. Sanitising only rewrites label text
// and never throws, so it has no bearing on whether the diagram is valid: the shim below makes it
// a no-op before Mermaid loads (same module instance, since ESM modules are singletons).
import { readFileSync } from "node:fs";
import DOMPurify from "dompurify";

// stdout carries only the results: anything Mermaid logs goes to stderr.
for (const level of ["log", "info", "debug", "warn", "trace"]) console[level] = console.error;

if (typeof DOMPurify.sanitize !== "function") {
  DOMPurify.addHook = () => {};
  DOMPurify.removeHook = () => {};
  DOMPurify.removeAllHooks = () => {};
  DOMPurify.sanitize = (text) => String(text);
}
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

function readInput(argv) {
  if (argv.length > 0) return argv.map((path) => readFileSync(path, "utf8"));
  const data = JSON.parse(readFileSync(0, "utf8"));
  if (!Array.isArray(data) || !data.every((t) => typeof t === "string")) {
    throw new Error("stdin must be a JSON array of strings");
  }
  return data;
}

async function check(text, index) {
  const result = { index, ok: false, diagramType: null, error: null, nodes: null, edges: null };
  try {
    // mermaid.parse: front matter, directives, type detection, then the diagram's own parser
    // feeding its database; it throws on any error.
    const parsed = await mermaid.parse(text);
    result.diagramType = parsed.diagramType;
    if (parsed.diagramType === "stateDiagram") {
      // The same parse again (after mermaid.parse has registered the diagram types), keeping the
      // diagram to read back what the parser understood.
      const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
      const data = diagram.db.getData();
      result.nodes = data.nodes.map((n) => [n.id, n.shape, n.label]);
      result.edges = data.edges.map((e) => [e.start, e.end, e.label]);
      result.ok = true;
    } else {
      result.error = `diagram type is ${parsed.diagramType}, not stateDiagram (stateDiagram-v2)`;
    }
  } catch (error) {
    result.error = `${error?.name ?? "Error"}: ${error?.message ?? String(error)}`;
  }
  return result;
}

let texts;
try {
  texts = readInput(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`check.mjs: ${error.message}\n`);
  process.exit(2);
}
let allOk = true;
for (const [index, text] of texts.entries()) {
  const result = await check(text, index);
  allOk &&= result.ok;
  process.stdout.write(JSON.stringify(result) + "\n");
}
process.exitCode = allOk ? 0 : 1;
