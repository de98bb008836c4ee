//! `--plot FILE.png|FILE.svg`: three panels — JCT CDF, queueing delay over
//! time, GPU utilization per type.
//!
//! No system fonts: text uses DejaVu Sans embedded from `assets/` (Bitstream
//! Vera licence, `assets/DejaVuSans-LICENSE.txt`) through plotters' ab_glyph
//! backend; PNG is encoded with the `png` crate from the RGB buffer.
use crate::error::ReportError;
use crate::summary::Report;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Image size in pixels (width, height).
pub const SIZE: (u32, u32) = (1500, 500);

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            log::warn!("embedded font did not load; plot text may be missing");
        }
    });
}

/// Output format, from the file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotFormat {
    /// `.png`
    Png,
    /// `.svg`
    Svg,
}

impl PlotFormat {
    /// The format of `path` (`.png` or `.svg`, case-insensitive).
    pub fn of(path: &Path) -> Result<PlotFormat, ReportError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("png") => Ok(PlotFormat::Png),
            Some("svg") => Ok(PlotFormat::Svg),
            _ => Err(ReportError::invalid(
                "--plot file",
                path.display().to_string(),
                "a name ending in .png or .svg",
            )),
        }
    }
}

/// Writes the plot of `report` to `path` (temp file + rename).
pub fn write_plot(report: &Report, path: &Path) -> Result<(), ReportError> {
    let fmt = PlotFormat::of(path)?;
    register_font();
    let perr = |e: String| ReportError::Plot {
        path: path.display().to_string(),
        msg: e,
    };
    let bytes = match fmt {
        PlotFormat::Svg => {
            let mut s = String::new();
            {
                let root = SVGBackend::with_string(&mut s, SIZE).into_drawing_area();
                draw(report, &root).map_err(perr)?;
                root.present().map_err(|e| perr(e.to_string()))?;
            }
            s.into_bytes()
        }
        PlotFormat::Png => {
            let (w, h) = SIZE;
            let mut buf = vec![0u8; (w * h * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area();
                draw(report, &root).map_err(perr)?;
                root.present().map_err(|e| perr(e.to_string()))?;
            }
            encode_png(&buf, w, h).map_err(perr)?
        }
    };
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    std::fs::write(&tmp, bytes).map_err(|e| ReportError::file(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| ReportError::file(path, e))
}

/// What [`check_image`] found in a plot file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The format.
    pub format: PlotFormat,
    /// Width in pixels (PNG) or of the SVG `width` attribute.
    pub width: u32,
    /// Height likewise.
    pub height: u32,
}

/// Validates a written plot: a PNG must decode fully (signature, chunks,
/// CRCs, pixel data); an SVG must parse as XML with an `<svg>` root.
pub fn check_image(path: &Path) -> Result<ImageInfo, ReportError> {
    let bad = |m: String| ReportError::file(path, m);
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    match PlotFormat::of(path)? {
        PlotFormat::Png => {
            if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
                return Err(bad("no PNG signature".into()));
            }
            let mut r = png::Decoder::new(std::io::Cursor::new(&bytes))
                .read_info()
                .map_err(|e| bad(format!("bad PNG: {e}")))?;
            let (width, height) = (r.info().width, r.info().height);
            let mut buf = vec![
                0;
                r.output_buffer_size()
                    .ok_or_else(|| bad("PNG too large".into()))?
            ];
            r.next_frame(&mut buf)
                .map_err(|e| bad(format!("bad PNG data: {e}")))?;
            Ok(ImageInfo {
                format: PlotFormat::Png,
                width,
                height,
            })
        }
        PlotFormat::Svg => {
            let text = String::from_utf8(bytes).map_err(|_| bad("SVG is not UTF-8".into()))?;
            let doc = roxmltree::Document::parse(&text)
                .map_err(|e| bad(format!("SVG is not XML: {e}")))?;
            let root = doc.root_element();
            if root.tag_name().name() != "svg" {
                return Err(bad(format!(
                    "root element is <{}>, not <svg>",
                    root.tag_name().name()
                )));
            }
            let dim = |a: &str| {
                root.attribute(a)
                    .and_then(|v| v.trim_end_matches("px").parse().ok())
                    .unwrap_or(0)
            };
            Ok(ImageInfo {
                format: PlotFormat::Svg,
                width: dim("width"),
                height: dim("height"),
            })
        }
    }
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| e.to_string())?;
        wr.write_image_data(rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn draw<DB: DrawingBackend>(report: &Report, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let panels = root.split_evenly((1, 3));
    jct_cdf(report, &panels[0]).map_err(e)?;
    queue_delay(report, &panels[1]).map_err(e)?;
    utilization(report, &panels[2]).map_err(e)?;
    Ok(())
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn jct_cdf<DB: DrawingBackend>(report: &Report, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
    let mut v: Vec<f64> = report.jobs.iter().filter_map(|j| j.jct_s).collect();
    v.sort_by(f64::total_cmp);
    let xmax = v.last().copied().unwrap_or(1.0).max(1.0) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption("JCT CDF", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..xmax, 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("job completion time (s)")
        .y_desc("fraction of jobs")
        .draw()?;
    let n = v.len() as f64;
    let mut pts = vec![(0.0, 0.0)];
    for (i, x) in v.iter().enumerate() {
        pts.push((*x, i as f64 / n));
        pts.push((*x, (i + 1) as f64 / n));
    }
    chart.draw_series(LineSeries::new(pts, BLUE.stroke_width(2)))?;
    Ok(())
}

fn queue_delay<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    let t0 = report.jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    let pts: Vec<(f64, f64)> = report
        .jobs
        .iter()
        .filter_map(|j| j.queue_delay_s.map(|d| ((j.submit - t0) as f64, d)))
        .collect();
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption("Queueing delay over time", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("submit time since first job (s)")
        .y_desc("queueing delay (s)")
        .draw()?;
    chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, RED.filled())))?;
    Ok(())
}

fn utilization<DB: DrawingBackend>(
    report: &Report,
    area: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    // Utilization when capacity is known, else GPU-hours.
    let per = &report.summary.per_type;
    let with_cap = per.values().any(|u| u.utilization.is_some());
    let bars: Vec<(String, f64)> = per
        .iter()
        .map(|(t, u)| {
            (
                t.clone(),
                if with_cap {
                    u.utilization.unwrap_or(0.0) * 100.0
                } else {
                    u.gpu_hours
                },
            )
        })
        .collect();
    let ymax = if with_cap {
        100.0
    } else {
        bars.iter().map(|b| b.1).fold(0.001, f64::max) * 1.1
    };
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            if with_cap {
                "GPU utilization per type"
            } else {
                "GPU-hours per type"
            },
            (FAMILY, 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n, 0f64..ymax)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len().max(1) * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < labels.len() {
                labels[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc(if with_cap {
            "utilization (%)"
        } else {
            "GPU-hours"
        })
        .draw()?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        Rectangle::new(
            [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, b.1)],
            Palette99::pick(i).filled(),
        )
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::job;

    fn sample() -> Report {
        let jobs = vec![
            job(1, 0, 10, 110, "gres/gpu:a100=4", "", ""),
            job(2, 5, 30, 365, "gres/gpu:v100=8", "", ""),
            job(3, 20, 40, 100, "gres/gpu:a100=2", "", ""),
        ];
        let cap = [("a100".to_string(), 8), ("v100".to_string(), 16)].into();
        Report::new(Default::default(), jobs, Some(&cap))
    }

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("cellsched-report-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn png_is_a_decodable_image() {
        let d = tmpdir("png");
        let p = d.join("r.png");
        write_plot(&sample(), &p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let dec = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut r = dec.read_info().unwrap();
        assert_eq!((r.info().width, r.info().height), SIZE);
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        // Not blank: the bars and text put non-white pixels in.
        let px = &buf[..info.buffer_size()];
        assert!(px.chunks(3).filter(|c| c != &[255, 255, 255]).count() > 1000);
        assert_eq!(
            check_image(&p).unwrap(),
            ImageInfo {
                format: PlotFormat::Png,
                width: SIZE.0,
                height: SIZE.1
            }
        );
        // A truncated PNG is caught.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert!(check_image(&p).is_err());
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn svg_is_xml_with_text() {
        let d = tmpdir("svg");
        let p = d.join("r.svg");
        write_plot(&sample(), &p).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        let doc = roxmltree::Document::parse(&s).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            s.contains("JCT CDF") && s.contains("a100"),
            "captions and labels drawn"
        );
        assert_eq!(
            check_image(&p).unwrap(),
            ImageInfo {
                format: PlotFormat::Svg,
                width: SIZE.0,
                height: SIZE.1
            }
        );
        std::fs::write(&p, &s[..s.len() - 10]).unwrap();
        assert!(check_image(&p).unwrap_err().to_string().contains("not XML"));
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn other_extensions_are_rejected() {
        let e = write_plot(&sample(), Path::new("/tmp/x.jpg")).unwrap_err();
        assert!(e.to_string().contains("x.jpg") && e.exit_code() == 2, "{e}");
    }
}
