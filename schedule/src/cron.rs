use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::CronError;

/// A validated cron expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    pub(crate) source: String,
    pub(crate) cron: Cron,
}

impl CronExpr {
    /// Parses and validates an expression.
    pub fn parse(expr: &str) -> Result<Self, CronError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(expr)
            .map_err(|e| CronError::new(e.to_string()))?;
        Ok(CronExpr {
            source: expr.to_owned(),
            cron,
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// Checks a cron expression with exactly the rules the runtime uses.
pub fn validate_cron(expr: &str) -> Result<(), CronError> {
    CronExpr::parse(expr).map(|_| ())
}
