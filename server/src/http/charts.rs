//! Inline SVG charts for the dashboard, rendered on the server: stacked
//! columns (counts per hour), horizontal bars (counts per group) and lines
//! (series over time). No script, no external file; the page stays one
//! HTML document.
//!
//! Every string that reaches the markup goes through [`esc`] (labels come
//! from clients: device keys, fingerprints). Elements carry classes that
//! the screenshot test counts: `g.col` per column, `rect.bar` per bar,
//! `g.series` per line (with `data-points`), `circle.pt` per point,
//! `text.label` per axis or bar label.

use std::fmt::Write;

/// Series and layer colours, distinguishable in print and for the common
/// colour-vision deficiencies (Okabe and Ito's palette, then two greys).
pub const PALETTE: [&str; 8] = ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#7f7f7f", "#000000"];

/// HTML/SVG text and attribute escaping.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

pub use crate::service::time::utc;

/// `MM-DD HH:00` (UTC) of a Unix hour.
pub fn hour_label(unix_hour: i64) -> String {
    let (_, m, d, h) = utc(unix_hour);
    format!("{m:02}-{d:02} {h:02}:00")
}

/// Mantissas of the round numbers an axis may end at.
const ROUND: [f64; 11] = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0];

/// The smallest round number (`ROUND` × 10^k) at or above `v` (1 for `v <= 0`).
fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    ROUND.iter().map(|m| m * p).find(|&c| c >= v * (1.0 - 1e-9)).unwrap_or(10.0 * p)
}

/// An axis maximum for counts: four whole gridline steps at or above `v`.
fn count_max(v: f64) -> f64 {
    4.0 * nice_max(v / 4.0).ceil()
}

/// A number for an axis or a tooltip: no trailing `.0`, thousands as `k`.
pub fn num(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

const W: f64 = 760.0;
const FONT: &str = "font-family=\"system-ui,sans-serif\" font-size=\"11\"";

fn open_svg(out: &mut String, id: &str, title: &str, h: f64, data: &str) {
    let _ = write!(
        out,
        "<svg class=\"chart\" id=\"{}\" {data} viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" role=\"img\" aria-label=\"{}\" {FONT}><title>{}</title>",
        esc(id),
        esc(title),
        esc(title)
    );
}

/// Horizontal gridlines and their labels from 0 to `max` at `x0..x1`, `y0` (bottom) to `y1` (top).
fn y_grid(out: &mut String, max: f64, x0: f64, x1: f64, y0: f64, y1: f64, unit: &str) {
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = y0 - (y0 - y1) * f64::from(i) / 4.0;
        let _ = write!(
            out,
            "<line x1=\"{x0}\" x2=\"{x1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e3e3e3\"/>\
             <text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">{}{}</text>",
            x0 - 4.0,
            y + 4.0,
            esc(&num(v)),
            esc(unit)
        );
    }
}

/// One stacked layer of a column chart.
pub struct Layer<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    /// One value per column.
    pub values: Vec<f64>,
}

/// Stacked columns, one per `x_labels` entry; every `label_every`-th
/// column is labelled under the axis. Each column is a `g.col` holding one
/// `rect.bar` per layer (zero-height when its value is 0) with a tooltip.
pub fn columns(id: &str, title: &str, x_labels: &[String], layers: &[Layer<'_>], label_every: usize) -> String {
    let n = x_labels.len().max(1);
    // A legend of several layers gets a row of its own above the columns.
    let (h, left, right, bottom) = (220.0, 48.0, 10.0, 36.0);
    let top = if layers.len() > 1 { 26.0 } else { 12.0 };
    let totals: Vec<f64> = (0..x_labels.len()).map(|i| layers.iter().map(|l| l.values.get(i).copied().unwrap_or(0.0)).sum()).collect();
    let max = count_max(totals.iter().copied().fold(0.0, f64::max));
    let (y0, y1) = (h - bottom, top);
    let step = (W - left - right) / n as f64;
    let bw = (step * 0.8).max(1.0);
    let mut s = String::new();
    open_svg(&mut s, id, title, h, &format!("data-columns=\"{}\"", x_labels.len()));
    y_grid(&mut s, max, left, W - right, y0, y1, "");
    for (i, label) in x_labels.iter().enumerate() {
        let x = left + step * i as f64 + (step - bw) / 2.0;
        let mut base = y0;
        let _ = write!(s, "<g class=\"col\">");
        for l in layers {
            let v = l.values.get(i).copied().unwrap_or(0.0);
            let bh = (y0 - y1) * v / max;
            base -= bh;
            let _ = write!(
                s,
                "<rect class=\"bar\" x=\"{x:.1}\" y=\"{base:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{}: {} {}</title></rect>",
                esc(l.colour),
                esc(label),
                esc(&num(v)),
                esc(l.name)
            );
        }
        s.push_str("</g>");
        if label_every > 0 && i % label_every == 0 {
            let _ = write!(s, "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{}</text>", x, y0 + 14.0, esc(label));
        }
    }
    let _ = write!(s, "<line x1=\"{left}\" x2=\"{}\" y1=\"{y0}\" y2=\"{y0}\" stroke=\"#888\"/>", W - right);
    // Legend, top right, when there is more than one layer.
    if layers.len() > 1 {
        let mut x = W - right - 8.0;
        for l in layers.iter().rev() {
            let w = 14.0 + 6.5 * l.name.chars().count() as f64;
            x -= w + 10.0;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"2\" width=\"10\" height=\"10\" fill=\"{}\"/><text class=\"label\" x=\"{:.1}\" y=\"11\">{}</text>",
                esc(l.colour),
                x + 14.0,
                esc(l.name)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars, one per (label, value), largest first as given; labels
/// are clipped to 40 characters, the whole label in the tooltip.
pub fn hbars(id: &str, title: &str, items: &[(String, f64)], colour: &str) -> String {
    let (row, left, right, top) = (20.0, 260.0, 70.0, 6.0);
    let h = top * 2.0 + row * items.len().max(1) as f64;
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1.0);
    let mut s = String::new();
    open_svg(&mut s, id, title, h, &format!("data-bars=\"{}\"", items.len()));
    for (i, (label, v)) in items.iter().enumerate() {
        let y = top + row * i as f64;
        let bw = (W - left - right) * v / max;
        let _ = write!(
            s,
            "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}<title>{}</title></text>\
             <rect class=\"bar\" x=\"{left}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {}</title></rect>\
             <text class=\"value\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#333\">{}</text>",
            left - 6.0,
            y + 14.0,
            esc(&clip(label, 40)),
            esc(label),
            y + 3.0,
            row - 6.0,
            esc(colour),
            esc(label),
            esc(&num(*v)),
            left + bw + 4.0,
            y + 14.0,
            esc(&num(*v))
        );
    }
    if items.is_empty() {
        let _ = write!(s, "<text class=\"label\" x=\"{left}\" y=\"{:.1}\" fill=\"#777\">none yet</text>", top + 14.0);
    }
    s.push_str("</svg>");
    s
}

/// One line of a line chart: (x, y) points in x order.
pub struct Line<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// Lines over a shared x axis (Unix hours, labelled as UTC dates) and a y
/// axis from 0, with a dotted reference line at `y_ref`. Each line is a
/// `g.series` with `data-points` and one `circle.pt` per point.
pub fn lines(id: &str, title: &str, series: &[Line<'_>], y_unit: &str, y_ref: f64) -> String {
    let (h, left, right, top, bottom) = (260.0, 48.0, 16.0, 12.0, 36.0);
    let pts = series.iter().flat_map(|l| l.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, y_ref);
    for &(x, y) in pts {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    if !x_min.is_finite() {
        (x_min, x_max) = (0.0, 1.0);
    }
    if x_max - x_min < 1.0 {
        x_max = x_min + 1.0;
    }
    let y_top = nice_max(y_max * 1.05);
    let (y0, y1) = (h - bottom, top);
    let sx = |x: f64| left + (W - left - right) * (x - x_min) / (x_max - x_min);
    let sy = |y: f64| y0 - (y0 - y1) * y / y_top;
    let mut s = String::new();
    open_svg(&mut s, id, title, h, &format!("data-series=\"{}\"", series.len()));
    y_grid(&mut s, y_top, left, W - right, y0, y1, y_unit);
    let _ = write!(
        s,
        "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444\" stroke-dasharray=\"2 3\"/>\
         <line x1=\"{left}\" x2=\"{}\" y1=\"{y0}\" y2=\"{y0}\" stroke=\"#888\"/>",
        W - right,
        sy(y_ref),
        sy(y_ref),
        W - right
    );
    for i in 0..=4 {
        let x = x_min + (x_max - x_min) * f64::from(i) / 4.0;
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"#555\">{}</text>",
            sx(x),
            y0 + 14.0,
            esc(&hour_label(x.round() as i64))
        );
    }
    for l in series {
        let _ = write!(s, "<g class=\"series\" data-points=\"{}\"><title>{}</title>", l.points.len(), esc(l.name));
        let path: Vec<String> = l.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>",
            esc(l.colour),
            if l.dashed { " stroke-dasharray=\"6 3\"" } else { "" },
            path.join(" ")
        );
        for &(x, y) in &l.points {
            let _ = write!(
                s,
                "<circle class=\"pt\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"><title>{}: {}{} at {}</title></circle>",
                sx(x),
                sy(y),
                esc(l.colour),
                esc(l.name),
                esc(&num(y)),
                esc(y_unit),
                esc(&hour_label(x.round() as i64))
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        let evil = "<script>alert('x')</script>&\"";
        let svg = hbars("a", evil, &[(evil.to_string(), 3.0)], "#000");
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
        let svg = columns("b", evil, &[evil.to_string()], &[Layer { name: evil, colour: "#000", values: vec![1.0] }], 1);
        assert!(!svg.contains("<script>"));
        let svg = lines("c", evil, &[Line { name: evil, colour: "#000", dashed: true, points: vec![(1.0, 2.0)] }], "×", 1.0);
        assert!(!svg.contains("<script>"));
    }

    #[test]
    fn shapes_are_counted() {
        let labels: Vec<String> = (0..48).map(|h| hour_label(h + 490_000)).collect();
        let svg = columns("r", "t", &labels, &[Layer { name: "reports", colour: "#000", values: vec![2.0; 48] }], 6);
        assert_eq!(svg.matches("class=\"col\"").count(), 48);
        assert_eq!(svg.matches("class=\"bar\"").count(), 48);
        let svg = lines(
            "l",
            "t",
            &[
                Line { name: "a", colour: "#000", dashed: false, points: vec![(1.0, 1.0), (2.0, 1.5), (3.0, 2.0)] },
                Line { name: "b", colour: "#111", dashed: true, points: vec![] },
            ],
            "×",
            1.0,
        );
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
        assert_eq!(svg.matches("class=\"pt\"").count(), 3);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), (1970, 1, 1, 0));
        // 2026-11-25 09:00 UTC = 1795597200 s.
        assert_eq!(utc(1_795_597_200 / 3600), (2026, 11, 25, 9));
        assert_eq!(utc(-1), (1969, 12, 31, 23));
        assert_eq!(hour_label(1_795_597_200 / 3600), "11-25 09:00");
    }

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 8.0);
        assert_eq!(nice_max(2.2), 2.5);
        assert_eq!(nice_max(2.65), 3.0);
        assert_eq!(nice_max(1234.0), 1500.0);
        // Whole steps for counts: 0, 1, 2, 3, 4 rather than 0.5 steps.
        assert_eq!(count_max(2.0), 4.0);
        assert_eq!(count_max(42.0), 48.0);
        assert_eq!(count_max(0.0), 4.0);
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
