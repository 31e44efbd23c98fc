// docs/configuration.md's two tables, written from src/config/table.ts by `npm run docs:config`
// (scripts/config-docs.mjs); test/config-docs.test.ts fails when the file holds anything else.
import { FIXED, VARIABLES, type Variable } from './table.js';

const cell = (markdown: string) => markdown.replaceAll('|', '\\|');
const row = (cells: readonly string[]) => `| ${cells.map(cell).join(' | ')} |`;

function variablesTable(): string {
  const rows = (Object.entries(VARIABLES) as Array<[string, Variable]>).map(([name, variable]) =>
    row([
      variable.flag === undefined ? `\`${name}\`` : `\`${name}\` (\`${variable.flag}\`)`,
      variable.readBy,
      'default' in variable ? `\`${variable.default}\`` : variable.unset,
      variable.description,
    ]),
  );
  return ['| variable | read by | default | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** `1 s`, `250 ms` for a duration (named …Ms), else the count with thousands separated (`100,000`). */
function quantity(key: string, value: number): string {
  if (!key.endsWith('Ms')) return String(value).replace(/\B(?=(\d{3})+$)/g, ',');
  return value % 1000 === 0 ? `${value / 1000} s` : `${value} ms`;
}

function fixedTable(): string {
  const rows = Object.entries(FIXED).map(([key, fixed]) =>
    row([`\`${key}\``, fixed.readBy, quantity(key, fixed.value), fixed.description]),
  );
  return ['| value | read by | fixed at | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** `document` with what stands between each pair of markers replaced by the table the declarations give today. */
export function configReference(document: string): string {
  let out = document;
  for (const [region, table] of [
    ['variables', variablesTable()],
    ['fixed', fixedTable()],
  ] as const) {
    const begin = `<!-- config:${region}: generated from src/config/table.ts by \`npm run docs:config\`, do not edit by hand -->`;
    const end = `<!-- /config:${region} -->`;
    const from = out.indexOf(begin);
    const to = out.indexOf(end, from);
    if (from < 0 || to < 0) throw new Error(`docs/configuration.md has no ${begin} … ${end} region`);
    out = `${out.slice(0, from + begin.length)}\n${table}\n${out.slice(to)}`;
  }
  return out;
}
