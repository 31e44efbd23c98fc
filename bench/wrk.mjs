// The cost phase of `npm run bench` (issue 13): wrk against the engine directly, the minimal Node proxy and
// `partnerctl serve`, with the CPU time each server process (and its children) spent over the phase.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_SECOND = Number((() => {
  try {
    return execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim();
  } catch {
    return '100';
  }
})());

export function wrkAvailable() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // wrk --version exits 1 after printing its version.
    return error.code !== 'ENOENT';
  }
}

/** The process and all its descendants (a launcher and its workers count too). */
function processTree(pid) {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) {
    let tasks = [];
    try {
      tasks = readdirSync(`/proc/${pids[i]}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        for (const child of readFileSync(`/proc/${pids[i]}/task/${task}/children`, 'utf8').trim().split(/\s+/)) {
          if (child) pids.push(Number(child));
        }
      } catch {}
    }
  }
  return pids;
}

/** User + system CPU seconds of the process tree so far. */
function cpuSeconds(pid) {
  let ticks = 0;
  for (const each of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${each}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces), counting from field 3.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {}
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

function parseDuration(text) {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!match) return null;
  const value = Number(match[1]);
  return { us: value / 1000, ms: value, s: value * 1000, m: value * 60_000 }[match[2]];
}

/** One wrk run (1 thread by default) with the CPU of `pid` over it; throws when any request failed or was not 2xx. */
export async function wrk({ url, headers = {}, threads = 1, connections = 32, seconds = 6, pid, label }) {
  const args = ['-t', String(threads), '-c', String(connections), '-d', `${seconds}s`, '--latency', '--timeout', '10s'];
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  args.push(url);
  const cpuBefore = cpuSeconds(pid);
  const output = await new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (text += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (text += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`${label}: wrk exited ${code}: ${text}`))));
  });
  const cpu = cpuSeconds(pid) - cpuBefore;
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]);
  const p50 = parseDuration(/^\s+50%\s+(\S+)/m.exec(output)?.[1] ?? '');
  const p99 = parseDuration(/^\s+99%\s+(\S+)/m.exec(output)?.[1] ?? '');
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0);
  const socketErrors = /Socket errors: (.*)/.exec(output)?.[1];
  if (!(requests > 0) || non2xx > 0 || (socketErrors && /(?:read|write|timeout) [1-9]/.test(socketErrors))) {
    throw new Error(`${label}: ${requests} requests, ${non2xx} non-2xx, socket errors: ${socketErrors ?? 'none'}\n${output}`);
  }
  return {
    requests,
    rps: Math.round(rps),
    p50_ms: p50,
    p99_ms: p99,
    cpu_seconds: Math.round(cpu * 100) / 100,
    cpu_us_per_request: Math.round((cpu / requests) * 1e6 * 10) / 10,
  };
}
