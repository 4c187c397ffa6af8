/**
 * Line colours of the compare page: colour-blind-safe, and the same run keeps the same colour on
 * every chart (a colour is a function of the run's place in the list and the list's length only).
 */

/** Okabe & Ito (2008), reordered so that the faint yellow comes last on a white ground. */
export const OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"] as const;

/** Paul Tol's "muted" scheme: nine colours that stay apart under the common colour blindnesses. */
export const TOL_MUTED = [
  "#332288",
  "#88CCEE",
  "#44AA99",
  "#117733",
  "#999933",
  "#DDCC77",
  "#CC6677",
  "#882255",
  "#AA4499",
] as const;

/** Viridis, sampled at eleven even stops (0, 0.1, ... 1). */
const VIRIDIS: readonly [number, number, number][] = [
  [68, 1, 84],
  [72, 36, 117],
  [65, 68, 135],
  [53, 95, 141],
  [42, 120, 142],
  [33, 145, 140],
  [34, 168, 132],
  [68, 191, 112],
  [122, 209, 81],
  [189, 223, 38],
  [253, 231, 37],
];

/** Stop short of viridis's pale yellow end, which a thin line on white barely shows. */
const RAMP_END = 0.88;
const GOLDEN = (Math.sqrt(5) - 1) / 2;

function hex(channel: number): string {
  return Math.round(channel).toString(16).padStart(2, "0");
}

/** Viridis at t in [0, 1], linearly between its stops. */
export function viridis(t: number): string {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  const a = VIRIDIS[i] as [number, number, number];
  const b = VIRIDIS[i + 1] as [number, number, number];
  return `#${hex(a[0] + (b[0] - a[0]) * f)}${hex(a[1] + (b[1] - a[1]) * f)}${hex(a[2] + (b[2] - a[2]) * f)}`.toUpperCase();
}

/**
 * `n` colours: Okabe–Ito up to 8, Tol's muted for 9, then points of the viridis ramp. On the ramp,
 * neighbours in the list are spread by the golden ratio rather than placed side by side, so that
 * runs listed next to each other (seeds of one config, say) do not get near-identical colours.
 */
export function palette(n: number): string[] {
  if (n <= OKABE_ITO.length) return OKABE_ITO.slice(0, Math.max(n, 0));
  if (n <= TOL_MUTED.length) return TOL_MUTED.slice(0, n);
  return Array.from({ length: n }, (_, i) => viridis(((i * GOLDEN) % 1) * RAMP_END));
}

/** `#RRGGBB` as `rgba(r, g, b, alpha)`, for bands and dimmed lines. */
export function withAlpha(colour: string, alpha: number): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(colour);
  if (!m) return colour;
  const [r, g, b] = [m[1], m[2], m[3]].map((part) => parseInt(part as string, 16));
  return `rgba(${r}, ${g}, ${b}, ${alpha})`;
}
