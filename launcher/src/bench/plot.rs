//! The sweep as an SVG picture: output throughput (system and per request) and TTFT (p50,
//! p99) against concurrency, side by side. Concurrency levels are categories on the x axis,
//! so 1, 2, 4 ... 64 sit evenly spaced, as on a log scale.

use plotters::prelude::*;

use super::report::{LevelRow, Report};

/// The picture, as SVG text.
pub fn svg(report: &Report) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1100, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let title = format!(
            "hearth bench: {} ({} in / {} out tokens){}",
            report.model,
            report.input_len,
            report.output_len,
            if report.interrupted { ", partial" } else { "" }
        );
        let root = root.titled(&title, ("sans-serif", 20)).map_err(err)?;
        let (left, right) = root.split_horizontally(550);
        let rows = &report.sweep;
        panel(
            &left,
            rows,
            "Output throughput",
            "tok/s",
            &[
                ("system tok/s", BLUE, &|r: &LevelRow| Some(r.system_tok_s)),
                ("per-request tok/s", RED, &|r: &LevelRow| {
                    r.per_request_tok_s
                }),
            ],
        )?;
        panel(
            &right,
            rows,
            "Time to first token",
            "seconds",
            &[
                ("TTFT p50", GREEN, &|r: &LevelRow| r.ttft_p50_s),
                ("TTFT p99", MAGENTA, &|r: &LevelRow| r.ttft_p99_s),
            ],
        )?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

type Series<'a> = (&'a str, RGBColor, &'a dyn Fn(&LevelRow) -> Option<f64>);

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[LevelRow],
    caption: &str,
    unit: &str,
    series: &[Series<'_>],
) -> anyhow::Result<()> {
    let n = i32::try_from(rows.len()).unwrap_or(i32::MAX).max(1);
    let top = rows
        .iter()
        .flat_map(|r| series.iter().filter_map(|(_, _, f)| f(r)))
        .fold(0.0_f64, f64::max);
    // Headroom so the legend, top centre, stays clear of the lines.
    let top = if top > 0.0 { top * 1.45 } else { 1.0 };
    // Levels sit at 0, 1, 2 ...; with as many labels asked for as levels, the ticks land
    // on whole numbers, which the formatter names by their concurrency.
    let x_range = -0.5..f64::from(n) - 0.5;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(62)
        .build_cartesian_2d(x_range, 0.0..top)
        .map_err(err)?;
    let labels: Vec<String> = rows.iter().map(|r| r.concurrency.to_string()).collect();
    chart
        .configure_mesh()
        .x_desc("concurrency")
        .y_desc(unit)
        .x_labels(rows.len().max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            labels.get(i as usize).cloned().unwrap_or_default()
        })
        .disable_x_mesh()
        .draw()
        .map_err(err)?;
    for &(name, color, value) in series {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i as f64, value(r)?)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svg_has_both_panels_every_level_and_the_legends() {
        let rows: Vec<LevelRow> = [1, 2, 4]
            .iter()
            .map(|&c| LevelRow {
                concurrency: c,
                system_tok_s: 50.0 * c as f64,
                per_request_tok_s: Some(60.0 / c as f64),
                ttft_p50_s: Some(0.1 * c as f64),
                ttft_p99_s: Some(0.2 * c as f64),
                ..Default::default()
            })
            .collect();
        let report = Report {
            model: "m".into(),
            sweep: rows,
            ..Default::default()
        };
        let svg = svg(&report).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        for text in [
            "Output throughput",
            "Time to first token",
            "system tok/s",
            "TTFT p99",
            "concurrency",
            ">\n4\n</text>",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        // A point per level and series.
        assert_eq!(svg.matches("<circle").count(), 3 * 4);
    }
}
