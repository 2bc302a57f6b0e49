"""The report: what a conversion produced, as data (ConversionResult, AppliedRewrite, rows)."""
