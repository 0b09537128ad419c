//! Live progress on stderr (indicatif): a bar over time for runs bounded by
//! a duration, a bar over a count otherwise. indicatif draws nothing when
//! stderr is not a terminal, so redirected output stays clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the bars are refreshed.
pub const TICK: Duration = Duration::from_millis(200);

fn styled(len: u64, template: &str, prefix: String) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    bar.set_prefix(prefix);
    bar
}

/// A bar over `total` time; positions are milliseconds.
pub fn time_bar(prefix: String, total: Duration) -> ProgressBar {
    styled(
        total.as_millis() as u64,
        "{prefix} [{elapsed_precise} / ETA {eta}] {wide_bar} {msg}",
        prefix,
    )
}

/// A bar over `total` items of `unit`, showing the rate.
pub fn count_bar(prefix: String, total: u64, unit: &str) -> ProgressBar {
    let template = format!(
        "{{prefix}} [{{elapsed_precise}} / ETA {{eta}}] {{wide_bar}} {{human_pos}}/{{human_len}} \
         {unit} ({{per_sec}}) {{msg}}"
    );
    styled(total, &template, prefix)
}
