// Latency over time on a canvas: one dot per inference, a rolling median,
// and a dashed line at every kernel swap, with real axes.

export interface Point {
  /** Seconds since the loop started. */
  t: number;
  ms: number;
}

export interface Mark {
  t: number;
  label: string;
  color: string;
}

function niceStep(range: number, ticks: number): number {
  const raw = range / ticks;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

function fmt(v: number, step: number): string {
  const digits = Math.max(0, -Math.floor(Math.log10(step)));
  return v.toFixed(Math.min(digits, 3));
}

export function rollingMedian(points: Point[], window: number): Point[] {
  const out: Point[] = [];
  for (let i = 0; i < points.length; i++) {
    const w = points.slice(Math.max(0, i - window + 1), i + 1).map((p) => p.ms).sort((a, b) => a - b);
    out.push({ t: points[i].t, ms: w[Math.floor(w.length / 2)] });
  }
  return out;
}

/** The axes' labels: x (the points' `t`) and y (their `ms`). */
export interface Axes {
  x: string;
  y: string;
}

const DEFAULT_AXES: Axes = { x: 'time since start (s)', y: 'inference latency (ms)' };

export function drawChart(canvas: HTMLCanvasElement, points: Point[], marks: Mark[], title: string, legend: [string, string][], axes: Axes = DEFAULT_AXES): void {
  const dpr = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || 800, cssH = canvas.clientHeight || 320;
  if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
  }
  const g = canvas.getContext('2d')!;
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, cssW, cssH);
  g.fillStyle = '#fff';
  g.fillRect(0, 0, cssW, cssH);
  const L = 64, R = 16, T = 34, B = 44;
  const w = cssW - L - R, h = cssH - T - B;

  const tMax = Math.max(1, ...points.map((p) => p.t), ...marks.map((m) => m.t)) * 1.02;
  const sorted = points.map((p) => p.ms).sort((a, b) => a - b);
  const top = sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] : 1;
  const yStep = niceStep(Math.max(top * 1.15, 1e-3), 5);
  const yMax = Math.ceil((top * 1.15) / yStep) * yStep || yStep;
  const xStep = niceStep(tMax, 8);
  const X = (t: number) => L + (t / tMax) * w;
  const Y = (ms: number) => T + h - (Math.min(ms, yMax) / yMax) * h;

  g.font = '12px system-ui, sans-serif';
  g.fillStyle = '#222';
  g.textBaseline = 'middle';
  g.fillText(title, L, 14);

  // Grid and tick labels.
  g.strokeStyle = '#e4e4e4';
  g.lineWidth = 1;
  g.textAlign = 'right';
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    g.beginPath();
    g.moveTo(L, Y(v));
    g.lineTo(L + w, Y(v));
    g.stroke();
    g.fillText(fmt(v, yStep), L - 6, Y(v));
  }
  g.textAlign = 'center';
  g.textBaseline = 'top';
  for (let t = 0; t <= tMax + 1e-9; t += xStep) {
    g.beginPath();
    g.moveTo(X(t), T);
    g.lineTo(X(t), T + h);
    g.stroke();
    g.fillText(fmt(t, xStep), X(t), T + h + 6);
  }
  g.strokeStyle = '#444';
  g.beginPath();
  g.moveTo(L, T);
  g.lineTo(L, T + h);
  g.lineTo(L + w, T + h);
  g.stroke();
  g.fillText(axes.x, L + w / 2, T + h + 24);
  g.save();
  g.translate(16, T + h / 2);
  g.rotate(-Math.PI / 2);
  g.textBaseline = 'middle';
  g.fillText(axes.y, 0, 0);
  g.restore();

  // Swaps.
  g.setLineDash([4, 3]);
  g.textAlign = 'left';
  g.textBaseline = 'top';
  marks.forEach((m, i) => {
    g.strokeStyle = m.color;
    g.beginPath();
    g.moveTo(X(m.t), T);
    g.lineTo(X(m.t), T + h);
    g.stroke();
    g.fillStyle = m.color;
    // Labels near the right edge go on the left of their line.
    const tw = g.measureText(m.label).width;
    const lx = X(m.t) + 3 + tw > L + w ? X(m.t) - 3 - tw : X(m.t) + 3;
    g.fillText(m.label, lx, T + 2 + (i % 4) * 13);
  });
  g.setLineDash([]);

  // Inferences and their rolling median.
  g.fillStyle = 'rgba(40, 90, 200, 0.45)';
  for (const p of points) g.fillRect(X(p.t) - 1.5, Y(p.ms) - 1.5, 3, 3);
  const med = rollingMedian(points, 9);
  g.strokeStyle = '#1a3f9c';
  g.lineWidth = 2;
  g.beginPath();
  med.forEach((p, i) => (i ? g.lineTo(X(p.t), Y(p.ms)) : g.moveTo(X(p.t), Y(p.ms))));
  g.stroke();

  // Legend.
  g.textBaseline = 'middle';
  g.textAlign = 'left';
  let lx = L + w;
  for (const [name, color] of [...legend].reverse()) {
    const tw = g.measureText(name).width;
    lx -= tw + 22;
    g.fillStyle = color;
    g.fillRect(lx, 10, 10, 10);
    g.fillStyle = '#222';
    g.fillText(name, lx + 14, 15);
  }
}
