//! `epicenter check metrics`: parse a /metrics body, print its warnings and, with `--lint`,
//! promtool's naming findings.

use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use epicenter_collector::exposition::{
    lint, lint_line_count, parse, write_json, write_json_with_lint, FormatChoice, LintFinding, ParseOptions, Validation,
};

use crate::style::count;

/// Warnings printed on stderr before the rest are summarised in one line.
const MAX_WARNINGS_SHOWN: usize = 20;

/// Exit status when the input cannot be read (usage errors exit 2, as clap does).
const EXIT_UNREADABLE: u8 = 3;

/// Exit status when `--lint` found something (promtool exits 3, which epicenter already
/// uses for an unreadable input).
const EXIT_LINT_FINDINGS: u8 = 4;

/// Arguments of `epicenter check metrics`.
#[derive(Args, Debug)]
pub(crate) struct MetricsArgs {
    /// File holding the body; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,

    /// Format to read the body as. `auto` picks OpenMetrics when the last line is `# EOF` and
    /// text 0.0.4 otherwise; it reads a text body with `# EOF` appended as text, and an
    /// OpenMetrics snippet without `# EOF` that carries exemplars as OpenMetrics (both with a
    /// warning).
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,

    /// Reject every violation of the format's specification, including those Prometheus's
    /// scraper tolerates, which are otherwise reported as warnings.
    #[arg(long)]
    strict: bool,

    /// Also check names the way `promtool check metrics` (Prometheus 2.42) does: help text,
    /// `_total` on counters only, base units (seconds, bytes), no abbreviated units, no
    /// `_count`/`_sum`/`_bucket` or `le`/`quantile` outside histograms and summaries, no type
    /// in the name, snake_case, no `:`. One line per finding on stdout, `FILE:LINE: metric:
    /// message` with promtool's message; exit status 4 when there is any.
    #[arg(long)]
    lint: bool,

    /// Print the parsed families as JSON on stdout (name, type, unit, help, samples with
    /// labels, value, timestamp in seconds, exemplar; then the first 1,000 warnings; with
    /// --lint a last key "lint": [{metric, rule, message, line, count}]). Non-finite values
    /// are the strings "NaN", "+Inf" and "-Inf".
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Auto,
    Text,
    Openmetrics,
}

/// Runs `epicenter check metrics` and returns its exit status.
pub(crate) fn check_metrics(args: MetricsArgs) -> ExitCode {
    let (source, body) = match read_body(args.file.as_ref()) {
        Ok(read) => read,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let options = ParseOptions {
        format: match args.format {
            FormatArg::Auto => FormatChoice::Auto,
            FormatArg::Text => FormatChoice::Text,
            FormatArg::Openmetrics => FormatChoice::OpenMetrics,
        },
        validation: if args.strict {
            Validation::Strict
        } else {
            Validation::Prometheus
        },
    };
    let mut exposition = match parse(&body, options) {
        Ok(exposition) => exposition,
        Err(error) => {
            eprintln!("error: {source}:{error}");
            return ExitCode::from(1);
        }
    };
    if let Err(error) = exposition.check_duplicates(options.validation) {
        eprintln!("error: {source}:{error}");
        return ExitCode::from(1);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        eprintln!("warning: {source}: body is empty: no families (is the exporter answering?)");
    }
    for warning in exposition.warnings.iter().take(MAX_WARNINGS_SHOWN) {
        eprintln!("warning: {source}:{warning}");
    }
    let total_warnings = exposition.warning_count();
    if total_warnings > MAX_WARNINGS_SHOWN {
        let listed = format!("; --json lists the first {}", exposition.warnings.len());
        eprintln!(
            "warning: {source}: {} more warnings not shown{listed}",
            total_warnings - MAX_WARNINGS_SHOWN
        );
    }
    let findings: Option<Vec<LintFinding>> = args.lint.then(|| lint(&exposition));
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = match (&findings, args.json) {
        (Some(findings), true) => write_json_with_lint(&exposition, findings, &mut out),
        (None, true) => write_json(&exposition, &mut out),
        (Some(findings), false) => write_findings(&source, findings, &mut out),
        (None, false) => Ok(()),
    };
    if let Err(error) = written.and_then(|()| out.flush()) {
        eprintln!("error: cannot write to standard output: {error}");
        return ExitCode::from(EXIT_UNREADABLE);
    }
    let tolerated = exposition.strict_rejections();
    let mut note = String::new();
    if total_warnings > 0 {
        note.push_str(&format!(", {}", count(total_warnings as u64, "warning", "warnings")));
        if tolerated > 0 {
            note.push_str("; --strict rejects the body");
        }
    }
    let lint_note = findings.as_deref().map_or(String::new(), lint_summary);
    eprintln!(
        "{source}: ok: {}, {} ({}{note}){lint_note}",
        count(exposition.families.len() as u64, "family", "families"),
        count(exposition.sample_count() as u64, "sample", "samples"),
        exposition.format.as_str(),
    );
    match findings {
        Some(findings) if !findings.is_empty() => ExitCode::from(EXIT_LINT_FINDINGS),
        _ => ExitCode::SUCCESS,
    }
}

/// `FILE:LINE: metric: message`, one finding a line (a newline in a quoted UTF-8 name shown
/// as `\n`); `(N times)` when promtool repeats it.
fn write_findings(source: &str, findings: &[LintFinding], out: &mut impl Write) -> std::io::Result<()> {
    for finding in findings {
        let metric = finding.metric.replace('\n', "\\n");
        write!(out, "{source}:{}: {metric}: {}", finding.line, finding.message)?;
        if finding.count > 1 {
            write!(out, " ({} times)", finding.count)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `; lint: 3 findings (5 lines in promtool's output)` for the summary line.
fn lint_summary(findings: &[LintFinding]) -> String {
    let lines = lint_line_count(findings);
    let mut summary = format!("; lint: {}", count(findings.len() as u64, "finding", "findings"));
    if lines != findings.len() {
        summary.push_str(&format!(" ({lines} lines in promtool's output)"));
    }
    summary
}

fn read_body(file: Option<&PathBuf>) -> Result<(String, Vec<u8>), String> {
    match file {
        Some(path) if path.as_os_str() != "-" => std::fs::read(path)
            .map(|body| (path.display().to_string(), body))
            .map_err(|error| format!("cannot read {}: {error}", path.display())),
        _ => {
            let mut body = Vec::new();
            std::io::stdin()
                .read_to_end(&mut body)
                .map_err(|error| format!("cannot read standard input: {error}"))?;
            Ok(("<stdin>".to_string(), body))
        }
    }
}
