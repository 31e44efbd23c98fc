import type { Said } from './say.js';
import type { Terminal } from './terminal.js';

/** Inputs at least this large show a progress bar (on a terminal's stderr only). */
export const PROGRESS_THRESHOLD = 5_000;

/**
 * A one-line progress bar on stderr, redrawn in place; nothing at all unless stderr is a terminal and the
 * input is large, so pipes and logs never see it.
 */
export function progressBar(terminal: Terminal, label: Said, total: number): { update(done: number): void; done(): void } {
  if (!terminal.errIsTTY || total < PROGRESS_THRESHOLD) return { update: () => {}, done: () => {} };
  const width = 30;
  let drawn = -1;
  const draw = (done: number) => {
    const share = Math.min(1, done / total);
    const percent = Math.floor(share * 100);
    if (percent === drawn) return;
    drawn = percent;
    const filled = Math.round(share * width);
    terminal.err.write(`\r${label.text} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} ${percent}%`);
  };
  draw(0);
  return {
    update: draw,
    done: () => terminal.err.write('\r\u001b[2K'),
  };
}
