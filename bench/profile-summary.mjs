// Self time of a `node --cpu-prof` profile (BENCH_CPU_PROF) by group and by function, idle excluded:
//
//   node bench/profile-summary.mjs /tmp/prof/CPU.*.cpuprofile [--top 30]
//
// Groups: the package a function comes from (node_modules/<name>), the project's own folders (dist/http,
// dist/domain, …), Node's internals (node:<module>), and V8's pseudo-nodes ((garbage collector), (program)).
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const topIndex = args.indexOf('--top');
const top = topIndex >= 0 ? Number(args.splice(topIndex, 2)[1]) : 30;

function groupOf(url, name) {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1];
  const own = /\/(dist|bench)\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  const ownFile = /\/(dist|bench)\/([^/]+)$/.exec(url);
  if (ownFile) return `${ownFile[1]}/${ownFile[2]}`;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  return url;
}

for (const file of args) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map();
  const deltas = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (deltas[i] ?? 0));
  }
  const groups = new Map();
  const functions = new Map();
  let busy = 0;
  for (const [id, micros] of self) {
    const { callFrame } = byId.get(id);
    const name = callFrame.functionName || '(anonymous)';
    if (name === '(idle)') continue;
    busy += micros;
    const group = groupOf(callFrame.url, name);
    groups.set(group, (groups.get(group) ?? 0) + micros);
    const key = `${name} ${group}${callFrame.url ? `:${callFrame.lineNumber + 1}` : ''}`;
    functions.set(key, (functions.get(key) ?? 0) + micros);
  }
  const pct = (micros) => `${((micros / busy) * 100).toFixed(1).padStart(5)} %`;
  console.log(`${file}: ${(busy / 1e6).toFixed(2)} s busy`);
  console.log('self time by group:');
  for (const [group, micros] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(micros)}  ${group}`);
  console.log('self time by function:');
  for (const [key, micros] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(micros)}  ${key}`);
}
