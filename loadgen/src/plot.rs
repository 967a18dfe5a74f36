//! A hand-written SVG chart of one or more runs over time: the top panel is throughput
//! (messages/s sent and received per interval), the bottom panel latency per interval
//! (send p50, p99, p99.9 and end-to-end p99, log-scale milliseconds); x is seconds since
//! the start of the run, and warm-up intervals are shaded. Each run has one colour; the
//! legend names its system, config and durability.
//!
//! Invariants: the output is well-formed XML with every text escaped; it never contains
//! NaN or infinities (empty runs, zero-length intervals and intervals without latency
//! samples are skipped, not plotted as zero); each series that has at least one point
//! is exactly one `<polyline>`; axis ticks are 1, 2 or 5 × 10^k.

use crate::record::{IntervalStats, RunRecord};
use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

const WIDTH: f64 = 960.0;
const PLOT_LEFT: f64 = 84.0;
const PLOT_RIGHT: f64 = WIDTH - 28.0;
const TOP_PANEL: Panel = Panel { top: 70.0, bottom: 300.0 };
const BOTTOM_PANEL: Panel = Panel { top: 350.0, bottom: 580.0 };
const LEGEND_TOP: f64 = 630.0;
const LEGEND_ROW: f64 = 20.0;
/// Ticks wanted on the x axis and the throughput axis.
const X_TICKS: usize = 8;
const Y_TICKS: usize = 5;
/// Log axis bounds in decades of ms: 1 µs to 100 s.
const LOG_DECADE_MIN: i32 = -3;
const LOG_DECADE_MAX: i32 = 5;
/// More decades than this and only the decades are labelled.
const LOG_LABEL_ALL_DECADES_MAX: i32 = 3;

const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// A series' look: name, stroke-dasharray ("" = solid), stroke width.
struct Style {
    name: &'static str,
    dash: &'static str,
    width: f64,
}

const THROUGHPUT_SERIES: [Style; 2] = [Style { name: "sent", dash: "", width: 1.6 }, Style { name: "received", dash: "6 4", width: 1.6 }];
const LATENCY_SERIES: [Style; 4] = [
    Style { name: "send p50", dash: "", width: 1.2 },
    Style { name: "send p99", dash: "6 3", width: 1.4 },
    Style { name: "send p99.9", dash: "2 3", width: 1.4 },
    Style { name: "e2e p99", dash: "9 3 2 3", width: 1.4 },
];

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created: check the path and permissions.
    #[error("create directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    /// The SVG could not be written or renamed into place; an old file is unchanged.
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The step for about `raw` per tick: 1, 2 or 5 × 10^k, at least `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 + 1e-9 {
        1.0
    } else if fraction <= 2.0 + 1e-9 {
        2.0
    } else if fraction <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// Decimal places that show multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    if step.is_finite() && step > 0.0 && step < 1.0 {
        (-step.log10().floor()) as usize
    } else {
        0
    }
}

fn round_to(x: f64, decimals: usize) -> f64 {
    let scale = 10f64.powi(decimals as i32);
    let r = (x * scale).round() / scale;
    if r == 0.0 {
        0.0 // not -0.0
    } else {
        r
    }
}

/// Ticks at multiples of a nice step, about `target` of them, covering `[lo, hi]` (the
/// first tick ≤ lo, the last ≥ hi). An empty or invalid range reads as `[lo, lo + 1]`
/// (`[0, 1]` when not finite).
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
    let hi = lo + span;
    let step = nice_step(span / target.max(1) as f64);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    let decimals = decimals_for(step);
    (first..=last.min(first + 1000)).map(|i| round_to(i as f64 * step, decimals)).collect()
}

/// `x` with at most `decimals` places, trailing zeros dropped.
fn trim_number(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, round_to(x, decimals));
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A linear tick label: 1500 → "1.5k", 2000000 → "2M" (`step` sets the precision).
fn linear_label(v: f64, step: f64) -> String {
    let (scale, suffix) = if v.abs() >= 1e6 {
        (1e6, "M")
    } else if v.abs() >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{}{suffix}", trim_number(v / scale, decimals_for(step / scale)))
}

/// Gridlines of a log axis over `[lo, hi]` (both > 0): (value, labelled), at 1, 2, 5
/// × 10^k from the decade at or below `lo` to the decade at or above `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, bool)> {
    let (first, last) = log_decades(lo, hi);
    let label_all = last - first <= LOG_LABEL_ALL_DECADES_MAX;
    let mut ticks = Vec::new();
    for k in first..last {
        for m in [1.0, 2.0, 5.0] {
            ticks.push((m * 10f64.powi(k), m == 1.0 || label_all));
        }
    }
    ticks.push((10f64.powi(last), true));
    ticks
}

/// The decades (exponents) bounding `[lo, hi]`, at least one apart, clamped to the
/// latency range.
fn log_decades(lo: f64, hi: f64) -> (i32, i32) {
    let decade = |x: f64, up: bool| -> i32 {
        if !(x.is_finite() && x > 0.0) {
            return 0;
        }
        let l = x.log10();
        let d = if up { (l - 1e-9).ceil() } else { (l + 1e-9).floor() };
        (d as i32).clamp(LOG_DECADE_MIN, LOG_DECADE_MAX)
    };
    let first = decade(lo, false);
    let last = decade(hi, true).max(first + 1);
    if last > LOG_DECADE_MAX {
        (LOG_DECADE_MAX - 1, LOG_DECADE_MAX)
    } else {
        (first, last)
    }
}

fn log_label(v: f64) -> String {
    trim_number(v, decimals_for(v))
}

/// Text for XML content and attribute values.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[derive(Clone, Copy)]
struct Panel {
    top: f64,
    bottom: f64,
}

/// The x scale: seconds → pixels.
struct XScale {
    max_secs: f64,
}

impl XScale {
    fn px(&self, secs: f64) -> f64 {
        PLOT_LEFT + (secs / self.max_secs).clamp(0.0, 1.0) * (PLOT_RIGHT - PLOT_LEFT)
    }
}

impl Panel {
    /// A linear value in `[0, max]` → pixels.
    fn linear_px(&self, v: f64, max: f64) -> f64 {
        self.bottom - (v / max).clamp(0.0, 1.0) * (self.bottom - self.top)
    }

    /// A log value in `[10^first, 10^last]` → pixels.
    fn log_px(&self, v: f64, (first, last): (i32, i32)) -> f64 {
        let l = if v > 0.0 { v.log10() } else { first as f64 };
        let t = ((l - first as f64) / (last - first) as f64).clamp(0.0, 1.0);
        self.bottom - t * (self.bottom - self.top)
    }
}

fn usable(i: &IntervalStats) -> bool {
    i.elapsed_secs.is_finite() && i.elapsed_secs >= 0.0 && i.interval_secs.is_finite() && i.interval_secs > 0.0
}

/// (seconds, value) points of one series.
type Points = Vec<(f64, f64)>;

/// (seconds, messages/s) for each usable interval.
fn rate_points(run: &RunRecord, count: fn(&IntervalStats) -> u64) -> Points {
    run.intervals.iter().filter(|i| usable(i)).map(|i| (i.elapsed_secs, count(i) as f64 / i.interval_secs)).collect()
}

/// (seconds, ms at `quantile`) for each usable interval with samples.
fn latency_points(run: &RunRecord, pick: fn(&IntervalStats) -> &Histogram<u64>, quantile: f64) -> Points {
    run.intervals
        .iter()
        .filter(|i| usable(i) && !pick(i).is_empty())
        .map(|i| (i.elapsed_secs, pick(i).value_at_quantile(quantile) as f64 / 1000.0))
        .filter(|&(_, ms)| ms.is_finite() && ms > 0.0)
        .collect()
}

/// The series of one run, in `THROUGHPUT_SERIES` and `LATENCY_SERIES` order.
fn run_series(run: &RunRecord) -> ([Points; 2], [Points; 4]) {
    let send: fn(&IntervalStats) -> &Histogram<u64> = |i| &i.send_latency_us;
    let e2e: fn(&IntervalStats) -> &Histogram<u64> = |i| &i.e2e_latency_us;
    (
        [rate_points(run, |i| i.sent), rate_points(run, |i| i.received)],
        [
            latency_points(run, send, 0.50),
            latency_points(run, send, 0.99),
            latency_points(run, send, 0.999),
            latency_points(run, e2e, 0.99),
        ],
    )
}

/// The seconds that were warm-up in any of `runs`, as disjoint spans in order
/// (overlapping and adjacent intervals merged, so shading never stacks).
fn warmup_spans(runs: &[RunRecord]) -> Vec<(f64, f64)> {
    let mut all: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|r| r.intervals.iter())
        .filter(|i| i.warmup && usable(i))
        .map(|i| ((i.elapsed_secs - i.interval_secs).max(0.0), i.elapsed_secs))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for (start, end) in all {
        match spans.last_mut() {
            Some(last) if start <= last.1 + 1e-9 => last.1 = last.1.max(end),
            _ => spans.push((start, end)),
        }
    }
    spans
}

fn polyline(svg: &mut String, class: &str, run: usize, style: &Style, colour: &str, points: &[String]) {
    if points.is_empty() {
        return;
    }
    let dash = if style.dash.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{}\"", style.dash) };
    let _ = writeln!(
        svg,
        "<polyline class=\"{class}\" data-run=\"{run}\" data-series=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{}\"{dash} points=\"{}\"/>",
        style.name,
        style.width,
        points.join(" ")
    );
}

fn legend_line(svg: &mut String, x: f64, y: f64, colour: &str, style: &Style) {
    let dash = if style.dash.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{}\"", style.dash) };
    let _ = writeln!(
        svg,
        "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"{}\"{dash}/>",
        x + 28.0,
        style.width
    );
}

fn text(svg: &mut String, x: f64, y: f64, anchor: &str, extra: &str, content: &str) {
    let _ = writeln!(svg, "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\"{extra}>{}</text>", escape_xml(content));
}

/// The chart of `runs` (any number, possibly without intervals) as an SVG document.
pub fn render_svg(runs: &[RunRecord], title: &str) -> String {
    let series: Vec<_> = runs.iter().map(run_series).collect();
    let height = LEGEND_TOP + (runs.len() + 1) as f64 * LEGEND_ROW + 12.0;
    let mut svg = String::new();
    let _ = writeln!(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(svg, "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>");
    text(&mut svg, WIDTH / 2.0, 26.0, "middle", " font-size=\"16\" font-weight=\"bold\"", title);
    let mut workloads: Vec<&str> = Vec::new();
    for r in runs {
        if !workloads.contains(&r.workload.name.as_str()) {
            workloads.push(&r.workload.name);
        }
    }
    if !workloads.is_empty() {
        text(&mut svg, WIDTH / 2.0, 46.0, "middle", " fill=\"#555\"", &format!("workload: {}", workloads.join(", ")));
    }

    // Scales.
    let max_secs = runs.iter().flat_map(|r| r.intervals.iter().filter(|i| usable(i)).map(|i| i.elapsed_secs)).fold(0.0, f64::max);
    let x_ticks = nice_ticks(0.0, max_secs, X_TICKS);
    let x = XScale { max_secs: x_ticks.last().copied().filter(|&m| m > 0.0).unwrap_or(1.0) };
    let x_step = x_ticks.get(1).map_or(1.0, |t| t - x_ticks[0]);
    let max_rate = series.iter().flat_map(|(t, _)| t.iter().flatten().map(|p| p.1)).fold(0.0, f64::max);
    let rate_ticks = nice_ticks(0.0, max_rate, Y_TICKS);
    let rate_max = rate_ticks.last().copied().filter(|&m| m > 0.0).unwrap_or(1.0);
    let rate_step = rate_ticks.get(1).map_or(1.0, |t| t - rate_ticks[0]);
    let latencies = series.iter().flat_map(|(_, l)| l.iter().flatten().map(|p| p.1));
    let (lat_lo, lat_hi) = latencies.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let decades = if lat_hi > 0.0 { log_decades(lat_lo, lat_hi) } else { (-1, 1) };

    // Warm-up shading, under everything else.
    for (start, end) in warmup_spans(runs) {
        let (x0, x1) = (x.px(start), x.px(end));
        for p in [TOP_PANEL, BOTTOM_PANEL] {
            let _ = writeln!(
                svg,
                "<rect class=\"warmup\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#000\" fill-opacity=\"0.07\"/>",
                p.top,
                x1 - x0,
                p.bottom - p.top
            );
        }
    }

    // Gridlines and axes.
    for p in [TOP_PANEL, BOTTOM_PANEL] {
        for &t in &x_ticks {
            let px = x.px(t);
            let _ = writeln!(svg, "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#e4e4e4\"/>", p.top, p.bottom);
            text(&mut svg, px, p.bottom + 16.0, "middle", "", &trim_number(t, decimals_for(x_step)));
        }
        let _ = writeln!(
            svg,
            "<rect x=\"{PLOT_LEFT}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\"/>",
            p.top,
            PLOT_RIGHT - PLOT_LEFT,
            p.bottom - p.top
        );
    }
    for &t in &rate_ticks {
        let py = TOP_PANEL.linear_px(t, rate_max);
        let _ = writeln!(svg, "<line x1=\"{PLOT_LEFT}\" y1=\"{py:.1}\" x2=\"{PLOT_RIGHT}\" y2=\"{py:.1}\" stroke=\"#e4e4e4\"/>");
        text(&mut svg, PLOT_LEFT - 6.0, py + 4.0, "end", "", &linear_label(t, rate_step));
    }
    for (t, labelled) in log_ticks(10f64.powi(decades.0), 10f64.powi(decades.1)) {
        let py = BOTTOM_PANEL.log_px(t, decades);
        let colour = if labelled { "#d0d0d0" } else { "#ececec" };
        let _ = writeln!(svg, "<line x1=\"{PLOT_LEFT}\" y1=\"{py:.1}\" x2=\"{PLOT_RIGHT}\" y2=\"{py:.1}\" stroke=\"{colour}\"/>");
        if labelled {
            text(&mut svg, PLOT_LEFT - 6.0, py + 4.0, "end", "", &log_label(t));
        }
    }
    let mid = |p: Panel| (p.top + p.bottom) / 2.0;
    let rotate = |y: f64| format!(" transform=\"rotate(-90 20 {y:.1})\"");
    text(&mut svg, 20.0, mid(TOP_PANEL), "middle", &rotate(mid(TOP_PANEL)), "throughput (messages/s)");
    text(&mut svg, 20.0, mid(BOTTOM_PANEL), "middle", &rotate(mid(BOTTOM_PANEL)), "latency (ms, log scale)");
    text(&mut svg, (PLOT_LEFT + PLOT_RIGHT) / 2.0, BOTTOM_PANEL.bottom + 34.0, "middle", "", "seconds since start");
    if max_rate <= 0.0 {
        text(&mut svg, (PLOT_LEFT + PLOT_RIGHT) / 2.0, mid(TOP_PANEL), "middle", " fill=\"#888\"", "no throughput data");
    }
    if lat_hi <= 0.0 {
        text(&mut svg, (PLOT_LEFT + PLOT_RIGHT) / 2.0, mid(BOTTOM_PANEL), "middle", " fill=\"#888\"", "no latency samples");
    }

    // Series.
    for (n, (throughput, latency)) in series.iter().enumerate() {
        let colour = COLOURS[n % COLOURS.len()];
        for (style, points) in THROUGHPUT_SERIES.iter().zip(throughput) {
            let pts: Vec<String> = points.iter().map(|&(s, v)| format!("{:.1},{:.1}", x.px(s), TOP_PANEL.linear_px(v, rate_max))).collect();
            polyline(&mut svg, "throughput", n, style, colour, &pts);
        }
        for (style, points) in LATENCY_SERIES.iter().zip(latency) {
            let pts: Vec<String> = points.iter().map(|&(s, v)| format!("{:.1},{:.1}", x.px(s), BOTTOM_PANEL.log_px(v, decades))).collect();
            polyline(&mut svg, "latency", n, style, colour, &pts);
        }
    }

    // Legend: the line styles, then one row per run.
    let mut lx = PLOT_LEFT;
    let ly = LEGEND_TOP;
    for style in THROUGHPUT_SERIES.iter().chain(&LATENCY_SERIES) {
        legend_line(&mut svg, lx, ly - 4.0, "#333", style);
        text(&mut svg, lx + 34.0, ly, "start", "", style.name);
        lx += 40.0 + 7.0 * style.name.len() as f64 + 16.0;
    }
    let _ = writeln!(svg, "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"28\" height=\"12\" fill=\"#000\" fill-opacity=\"0.07\"/>", ly - 10.0);
    text(&mut svg, lx + 34.0, ly, "start", "", "warm-up");
    for (n, run) in runs.iter().enumerate() {
        let y = LEGEND_TOP + (n + 1) as f64 * LEGEND_ROW;
        let colour = COLOURS[n % COLOURS.len()];
        let _ = writeln!(svg, "<rect x=\"{PLOT_LEFT}\" y=\"{:.1}\" width=\"28\" height=\"4\" fill=\"{colour}\"/>", y - 6.0);
        let label = format!("{} — {} ({})", run.system, run.config, run.durability.label());
        text(&mut svg, PLOT_LEFT + 34.0, y, "start", " class=\"legend\"", &label);
    }
    let _ = writeln!(svg, "</svg>");
    svg
}

/// Writes `render_svg(runs, title)` to `path`, creating parent directories; the file is
/// replaced atomically.
pub fn write_svg(path: &Path, runs: &[RunRecord], title: &str) -> Result<(), PlotError> {
    let svg = render_svg(runs, title);
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => {
            std::fs::create_dir_all(p).map_err(|source| PlotError::CreateDir { path: p.to_path_buf(), source })?;
            p
        }
        None => Path::new("."),
    };
    let werr = |source| PlotError::Write { path: path.to_path_buf(), source };
    let mut tmp = tempfile::Builder::new().prefix(".plot-").suffix(".tmp").tempfile_in(parent).map_err(werr)?;
    tmp.write_all(svg.as_bytes()).map_err(werr)?;
    tmp.as_file().sync_all().map_err(werr)?;
    tmp.persist(path).map_err(|e| werr(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{record_us, Durability, Workload};

    fn check(lo: f64, hi: f64, target: usize, expected: &[f64]) {
        assert_eq!(nice_ticks(lo, hi, target), expected, "nice_ticks({lo}, {hi}, {target})");
    }

    #[test]
    fn nice_ticks_cases() {
        check(0.0, 100.0, 5, &[0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        check(0.0, 97.0, 5, &[0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        check(0.0, 101.0, 5, &[0.0, 50.0, 100.0, 150.0]);
        check(0.0, 1.0, 5, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        check(0.0, 0.7, 7, &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
        check(3.0, 3.5, 5, &[3.0, 3.1, 3.2, 3.3, 3.4, 3.5]);
        check(0.0, 12_345.0, 4, &[0.0, 5000.0, 10_000.0, 15_000.0]);
        check(0.0, 60.0, 8, &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
        check(-7.0, 7.0, 4, &[-10.0, -5.0, 0.0, 5.0, 10.0]);
        check(0.0, 0.0, 5, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        check(f64::NAN, 5.0, 5, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        check(0.0, f64::INFINITY, 5, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        check(0.0, 3.0e-5, 3, &[0.0, 1.0e-5, 2.0e-5, 3.0e-5]);
    }

    #[test]
    fn labels() {
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(linear_label(1500.0, 500.0), "1.5k");
        assert_eq!(linear_label(2_000_000.0, 1_000_000.0), "2M");
        assert_eq!(linear_label(0.0, 0.2), "0");
        assert_eq!(linear_label(0.6, 0.2), "0.6");
        assert_eq!(log_label(0.001), "0.001");
        assert_eq!(log_label(0.05), "0.05");
        assert_eq!(log_label(200.0), "200");
        assert_eq!(log_decades(0.08, 2.5), (-2, 1));
        assert_eq!(log_decades(1.0, 1.0), (0, 1));
        assert_eq!(log_decades(1.0e-9, 1.0e9), (-3, 5));
        let ticks = log_ticks(0.01, 10.0);
        assert_eq!(ticks.first(), Some(&(0.01, true)));
        assert_eq!(ticks.last(), Some(&(10.0, true)));
        assert_eq!(ticks.len(), 10);
        assert!(log_ticks(0.001, 1e5).iter().all(|&(v, labelled)| labelled == ((v.log10() - v.log10().round()).abs() < 1e-9)));
        assert_eq!(escape_xml("a<b & \"c\" 'd'>\u{1}"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt; ");
    }

    fn workload() -> Workload {
        Workload {
            name: "plot <test>".into(),
            message_bytes: 1024,
            topics: 1,
            queues_per_topic: 8,
            producers: 1,
            consumers: 1,
            in_flight_per_producer: 32,
            batch_size: 1,
            send_mode: "async".into(),
            target_rate_per_sec: None,
            duration_secs: 10,
            warmup_secs: 2,
        }
    }

    /// A run of `seconds` 1 s intervals (the first `warmup` of them warm-up) with
    /// `samples` latency samples per interval, latencies longer as `rate` grows.
    fn synthetic(system: &str, config: &str, seconds: usize, warmup: usize, rate: u64, samples: u64) -> RunRecord {
        let scale = 1 + rate / 50_000;
        let mut r = RunRecord::new(system, config, Durability::WithinOneSecond, workload());
        for n in 0..seconds {
            let mut s = IntervalStats::new(n as f64 + 1.0, 1.0, n < warmup);
            s.sent = if rate == 0 { 0 } else { rate + (n as u64 * 37) % 900 };
            s.sent_bytes = s.sent * 1024;
            s.received = s.sent.saturating_sub(50);
            for k in 0..samples {
                let spike = if k % 997 == 0 { 40_000 } else { 0 };
                record_us(&mut s.send_latency_us, scale * (200 + (k * 7919) % 3000 + spike) + (n as u64 % 7) * 100);
                record_us(&mut s.e2e_latency_us, scale * (800 + (k * 104_729) % 9000));
            }
            r.push_interval(s);
        }
        r
    }

    /// Minimal XML well-formedness: one root, balanced tags, quoted attributes, no raw
    /// `<` or bare `&` in text or attribute values.
    fn assert_well_formed(xml: &str) {
        fn check_text(t: &str) {
            let mut rest = t;
            while let Some(i) = rest.find('&') {
                rest = &rest[i..];
                let end = rest.find(';').unwrap_or_else(|| panic!("bare & in {t:?}"));
                let entity = &rest[1..end];
                assert!(
                    ["amp", "lt", "gt", "quot", "apos"].contains(&entity) || entity.starts_with('#'),
                    "unknown entity &{entity}; in {t:?}"
                );
                rest = &rest[end..];
            }
        }
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut rest = xml.trim_start();
        if rest.starts_with("<?xml") {
            rest = &rest[rest.find("?>").expect("xml declaration ends") + 2..];
        }
        while let Some(lt) = rest.find('<') {
            let (txt, tag_on) = rest.split_at(lt);
            check_text(txt);
            assert!(!stack.is_empty() || txt.trim().is_empty(), "text outside the root: {txt:?}");
            let gt = tag_on.find('>').expect("tag ends");
            let tag = &tag_on[1..gt];
            rest = &tag_on[gt + 1..];
            assert!(!tag.contains('<'), "< inside tag {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name.trim()), "closing tag");
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
            let name = &body[..name_end];
            assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == ':'), "name {name:?}");
            // Attributes: name="value" pairs.
            let mut attrs = body[name_end..].trim();
            while !attrs.is_empty() {
                let eq = attrs.find("=\"").unwrap_or_else(|| panic!("attribute without =\" in {tag:?}"));
                let after = &attrs[eq + 2..];
                let close = after.find('"').expect("attribute value ends");
                check_text(&after[..close]);
                attrs = after[close + 1..].trim_start();
            }
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
        }
        check_text(rest);
        assert!(rest.trim().is_empty(), "text after the root");
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert_eq!(roots, 1);
    }

    #[test]
    fn warmup_spans_merge_across_runs() {
        let runs = [synthetic("a", "x", 6, 2, 10, 0), synthetic("b", "y", 6, 3, 10, 0), synthetic("c", "z", 6, 0, 10, 0)];
        assert_eq!(warmup_spans(&runs), vec![(0.0, 3.0)]);
        assert_eq!(warmup_spans(&runs[2..]), vec![]);
        let svg = render_svg(&runs, "t");
        assert_eq!(svg.matches("class=\"warmup\"").count(), 2, "one shaded span per panel");
    }

    #[test]
    fn the_checker_rejects_bad_xml() {
        for bad in ["<svg><g></svg>", "<svg>a & b</svg>", "<svg x=1/>", "<svg/><svg/>", "<svg><g></g>"] {
            assert!(std::panic::catch_unwind(|| assert_well_formed(bad)).is_err(), "{bad}");
        }
        assert_well_formed("<?xml version=\"1.0\"?>\n<svg a=\"&amp;\"><g/>x &lt; y</svg>\n");
    }

    #[test]
    fn one_polyline_per_series() {
        let runs = [
            synthetic("RingMQ", "sync flush, 1 shard", 12, 2, 50_000, 2000),
            synthetic("Redis <Streams> & co", "appendfsync \"always\"", 9, 1, 30_000, 500),
        ];
        let svg = render_svg(&runs, "A & B < C");
        assert_well_formed(&svg);
        assert_eq!(svg.matches("<polyline").count(), 2 * 6);
        assert_eq!(svg.matches("<polyline class=\"throughput\"").count(), 2 * 2);
        assert_eq!(svg.matches("<polyline class=\"latency\"").count(), 2 * 4);
        assert!(svg.contains("Redis &lt;Streams&gt; &amp; co — appendfsync &quot;always&quot; (≤ 1 s)"));
        assert!(svg.contains("A &amp; B &lt; C"));
        assert!(svg.contains("workload: plot &lt;test&gt;"));
        assert!(svg.contains("class=\"warmup\""));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // The first run's sent series has a point per interval, warm-up included.
        let first = svg.lines().find(|l| l.contains("data-run=\"0\" data-series=\"sent\"")).expect("sent series");
        assert_eq!(first.split("points=\"").nth(1).map(|p| p.split(' ').count()), Some(12));
    }

    #[test]
    fn degenerate_runs_render() {
        let mut zero_len = synthetic("zero", "interval", 1, 0, 10, 1);
        zero_len.intervals[0].interval_secs = 0.0;
        let cases: Vec<(Vec<RunRecord>, usize)> = vec![
            (vec![], 0),
            (vec![RunRecord::new("empty", "no intervals", Durability::Memory, workload())], 0),
            // Throughput but no latency samples: only the two throughput series.
            (vec![synthetic("silent", "no samples", 5, 1, 1000, 0)], 2),
            // Nothing sent at all: zero-rate lines, no latency.
            (vec![synthetic("idle", "zero", 3, 0, 0, 0)], 2),
            (vec![zero_len], 0),
            (vec![synthetic("all warm-up", "x", 3, 3, 100, 10)], 6),
        ];
        for (runs, polylines) in cases {
            let svg = render_svg(&runs, "degenerate");
            assert_well_formed(&svg);
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            assert_eq!(svg.matches("<polyline").count(), polylines, "{svg}");
        }
    }

    #[test]
    fn writes_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a/b/plot.svg");
        let runs = [synthetic("RingMQ", "async flush", 4, 1, 1000, 100)];
        write_svg(&path, &runs, "t").expect("writes");
        assert_eq!(std::fs::read_to_string(&path).expect("reads"), render_svg(&runs, "t"));
        // Sample for eyeballing (the path is fixed so it can be opened after a run).
        if let Ok(p) = std::env::var("RINGMQ_SAMPLE_PLOT") {
            let runs = [
                synthetic("RingMQ", "sync flush, 1 shard", 30, 5, 80_000, 3000),
                synthetic("rocketmq-broker (crates.io)", "SYNC_FLUSH", 30, 5, 40_000, 3000),
                synthetic("Redis Streams", "appendfsync everysec <&>", 30, 5, 120_000, 3000),
            ];
            write_svg(Path::new(&p), &runs, "Sample: 1 topic, 8 queues, 1 KiB").expect("writes sample");
        }
    }
}
