/** One CSV field: quoted when it holds a quote, a comma or a line break, or starts like a spreadsheet formula. */
export function csvField(value: string | number | null): string {
  const text = value === null ? '' : String(value);
  return /[",\n\r]/.test(text) || /^[=+\-@\t]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
