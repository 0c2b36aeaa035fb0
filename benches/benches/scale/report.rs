//! The report: tables, ratios and a PASS or FAIL verdict next to every target, and the summary
//! of all verdicts at the end.

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `c / b` as `1.23x`.
pub fn ratio(c: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", c / b)
    } else if c == 0.0 {
        "1.00x".to_owned()
    } else {
        "inf".to_owned()
    }
}

/// µs as ms with three decimals.
pub fn ms(us: i64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Every verdict of the run.
#[derive(Default)]
pub struct Verdicts {
    passed: usize,
    failed: Vec<String>,
}

impl Verdicts {
    /// Records a verdict on target `what`; `PASS` or `FAIL` for its row.
    pub fn check(&mut self, ok: bool, what: String) -> &'static str {
        if ok {
            self.passed += 1;
            "PASS"
        } else {
            self.failed.push(what);
            "FAIL"
        }
    }

    /// A scenario that could not be measured counts as a failure.
    pub fn failed(&mut self, what: String) {
        self.failed.push(what);
    }

    pub fn summary(&self) {
        println!();
        println!(
            "targets: {} passed, {} failed",
            self.passed,
            self.failed.len()
        );
        for f in &self.failed {
            println!("  FAIL {f}");
        }
    }
}

/// One row of a side-by-side table: metric, baseline, cronguard, ratio, target, verdict.
pub fn row(metric: &str, b: String, c: String, ratio: String, target: &str, verdict: &str) {
    println!("  {metric:<22} {b:>19} {c:>19} {ratio:>8}  {target:<26} {verdict}");
}

/// The title and the column heads of a side-by-side table.
pub fn header(title: &str) {
    println!();
    println!("{title}");
    row(
        "",
        "baseline".into(),
        "cronguard".into(),
        "ratio".into(),
        "target",
        "",
    );
}

/// One row of a single-value table: metric, value, target, verdict.
pub fn value_row(metric: &str, value: String, target: &str, verdict: &str) {
    println!("  {metric:<50} {value:>22}  {target:<30} {verdict}");
}

/// The column heads of a single-value table.
pub fn value_header() {
    value_row("", "value".into(), "target", "");
}
