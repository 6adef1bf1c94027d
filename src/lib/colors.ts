/** GitLab's text colour for a label background: dark text on light colours, white on dark ones. */
export function labelTextColor(background: string): string {
  let hex = background.trim().replace(/^#/, '');
  if (hex.length === 3) hex = hex.split('').map((c) => c + c).join('');
  if (!/^[0-9a-fA-F]{6}$/.test(hex)) return '#FFFFFF';
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return r + g + b > 500 ? '#333333' : '#FFFFFF';
}
