//! `kappa groups`: list consumer groups, show their offsets and lag, reset them.

use std::io::Write;

use anyhow::bail;
use kappa_wire::{GroupOffsetsOut, GroupsOut, OffsetsResponse, ResetRequest};
use serde_json::{json, Value};

use super::http::{self, segment, Client};
use super::table::{Align, Table};

/// Consumer group subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// List consumer groups.
    List {
        /// Print the server's JSON answer instead of one name per line.
        #[arg(long)]
        json: bool,
    },
    /// Show a group's committed offsets, the partitions' end offsets and the lag.
    Offsets {
        /// Group name.
        group: String,
        /// Only this topic (default: every topic the group has committed on).
        #[arg(long)]
        topic: Option<String>,
        /// Print the server's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Set a group's offsets on every partition of a topic.
    Reset {
        /// Group name.
        group: String,
        /// Topic whose offsets are set.
        #[arg(long)]
        topic: String,
        /// `earliest`, `latest`, a timestamp in ms, or `offset:<n>` (clamped to each partition).
        #[arg(long, value_parser = parse_reset_to)]
        to: ResetTo,
    },
}

/// Where `groups reset` moves a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// Each partition's start.
    Earliest,
    /// Each partition's end.
    Latest,
    /// The first record at or after this timestamp (ms since the epoch).
    Timestamp(u64),
    /// This offset, clamped to each partition's `[start, end]`.
    Offset(u64),
}

impl ResetTo {
    /// The `to` field of the reset request.
    pub fn to_json(self) -> Value {
        match self {
            ResetTo::Earliest => json!("earliest"),
            ResetTo::Latest => json!("latest"),
            ResetTo::Timestamp(ms) => json!({ "timestamp": ms }),
            ResetTo::Offset(offset) => json!({ "offset": offset }),
        }
    }
}

/// Parses `--to`: `earliest`, `latest`, a timestamp in ms, or `offset:<n>`.
pub fn parse_reset_to(text: &str) -> Result<ResetTo, String> {
    let bad = || {
        format!("expected `earliest`, `latest`, a timestamp in ms or `offset:<n>`, got {text:?}")
    };
    match text {
        "earliest" => Ok(ResetTo::Earliest),
        "latest" => Ok(ResetTo::Latest),
        _ => match text.strip_prefix("offset:") {
            Some(n) => n.parse().map(ResetTo::Offset).map_err(|_| bad()),
            None => text.parse().map(ResetTo::Timestamp).map_err(|_| bad()),
        },
    }
}

/// Runs a groups subcommand, printing to `out`.
pub fn run(client: &Client, command: GroupsCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        GroupsCommand::List { json } => {
            let body = client.get("/v1/groups", &[])?;
            if json {
                writeln!(out, "{}", body.trim_end())?;
            } else {
                for group in http::parse::<GroupsOut>("/v1/groups", &body)?.groups {
                    writeln!(out, "{group}")?;
                }
            }
        }
        GroupsCommand::Offsets { group, topic, json } => {
            let path = format!("/v1/groups/{}/offsets", segment(&group));
            let query: Vec<_> = topic.into_iter().map(|t| ("topic", t)).collect();
            let body = client.get(&path, &query)?;
            let offsets: GroupOffsetsOut = http::parse(&path, &body)?;
            let committed = offsets
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.committed.is_some());
            if !committed {
                check_known(client, &group)?;
            }
            if json {
                writeln!(out, "{}", body.trim_end())?;
            } else {
                out.write_all(render_offsets(&offsets).as_bytes())?;
            }
        }
        GroupsCommand::Reset { group, topic, to } => {
            let path = format!("/v1/groups/{}/reset", segment(&group));
            let body = serde_json::to_value(ResetRequest {
                topic: topic.clone(),
                to: to.to_json(),
            })?;
            let answer: OffsetsResponse = http::parse(&path, &client.post_json(&path, &body)?)?;
            writeln!(out, "reset group {group} on topic {topic}:")?;
            let mut table = Table::new(&[("PARTITION", Align::Right), ("OFFSET", Align::Right)]);
            for o in answer.offsets {
                table.row(vec![o.partition.to_string(), o.offset.to_string()]);
            }
            out.write_all(table.render().as_bytes())?;
        }
    }
    Ok(())
}

/// Fails unless `group` is in `GET /v1/groups`. The server knows a group
/// by its commits and answers the offsets of any other name with no topics
/// (or, for `?topic=`, with no commits), so the client tells them apart.
fn check_known(client: &Client, group: &str) -> anyhow::Result<()> {
    let groups = client.get_json::<GroupsOut>("/v1/groups", &[])?.groups;
    if groups.iter().any(|g| g == group) {
        return Ok(());
    }
    let suggestions = super::suggest::closest(group, groups.iter().map(String::as_str));
    bail!(
        "error: unknown group {group:?}: it has committed no offsets (`kappa groups list` \
         lists the groups){}",
        super::suggest::did_you_mean(&suggestions)
    )
}

/// The `groups offsets` table; a partition without a commit shows `-`.
pub fn render_offsets(offsets: &GroupOffsetsOut) -> String {
    let mut table = Table::new(&[
        ("TOPIC", Align::Left),
        ("PARTITION", Align::Right),
        ("COMMITTED", Align::Right),
        ("END", Align::Right),
        ("LAG", Align::Right),
    ]);
    for topic in &offsets.topics {
        for p in &topic.partitions {
            table.row(vec![
                topic.topic.clone(),
                p.partition.to_string(),
                p.committed.map_or("-".to_string(), |c| c.to_string()),
                p.end_offset.to_string(),
                p.lag.to_string(),
            ]);
        }
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    #[test]
    fn parses_reset_targets() {
        assert_eq!(parse_reset_to("earliest"), Ok(ResetTo::Earliest));
        assert_eq!(parse_reset_to("latest"), Ok(ResetTo::Latest));
        assert_eq!(
            parse_reset_to("1767225600000"),
            Ok(ResetTo::Timestamp(1_767_225_600_000))
        );
        assert_eq!(parse_reset_to("offset:42"), Ok(ResetTo::Offset(42)));
        for bad in ["offset:", "offset:-1", "soon", "-3", ""] {
            assert!(parse_reset_to(bad).is_err(), "{bad}");
        }
        assert_eq!(ResetTo::Offset(42).to_json(), json!({"offset": 42}));
        assert_eq!(ResetTo::Timestamp(7).to_json(), json!({"timestamp": 7}));
        assert_eq!(ResetTo::Earliest.to_json(), json!("earliest"));
    }

    #[test]
    fn renders_offsets() {
        let offsets: GroupOffsetsOut = serde_json::from_str(
            r#"{"group":"g","topics":[{"topic":"orders","partitions":[
                {"partition":0,"committed":18,"start_offset":0,"end_offset":20,"lag":2},
                {"partition":1,"committed":null,"start_offset":3,"end_offset":1000,"lag":997}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            render_offsets(&offsets),
            "TOPIC   PARTITION  COMMITTED   END  LAG\n\
             orders          0         18    20    2\n\
             orders          1          -  1000  997\n"
        );
    }

    #[test]
    fn reset_posts_the_target_and_prints_new_offsets() {
        let server = FakeServer::start(vec![Canned::json(
            200,
            r#"{"group":"g","topic":"t","offsets":[{"partition":0,"offset":42},{"partition":1,"offset":7}]}"#,
        )]);
        let mut out = Vec::new();
        let reset = GroupsCommand::Reset {
            group: "g".into(),
            topic: "t".into(),
            to: ResetTo::Offset(42),
        };
        run(&Client::new(&server.url), reset, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "reset group g on topic t:\nPARTITION  OFFSET\n        0      42\n        1       7\n"
        );
        let request = &server.requests()[0];
        assert_eq!(request.target, "/v1/groups/g/reset");
        let body: Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(body, json!({"topic": "t", "to": {"offset": 42}}));
    }

    #[test]
    fn offsets_passes_the_topic_filter() {
        let server = FakeServer::start(vec![
            Canned::json(200, r#"{"group":"g","topics":[]}"#),
            Canned::json(200, r#"{"groups":["g"]}"#),
        ]);
        let mut out = Vec::new();
        let offsets = GroupsCommand::Offsets {
            group: "g".into(),
            topic: Some("orders".into()),
            json: true,
        };
        run(&Client::new(&server.url), offsets, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"group\":\"g\",\"topics\":[]}\n"
        );
        assert_eq!(
            server.requests()[0].target,
            "/v1/groups/g/offsets?topic=orders"
        );
    }

    #[test]
    fn offsets_of_a_group_without_commits_is_an_error() {
        let server = FakeServer::start(vec![
            Canned::json(200, r#"{"group":"gruop1","topics":[]}"#),
            Canned::json(200, r#"{"groups":["group1","other"]}"#),
        ]);
        let offsets = GroupsCommand::Offsets {
            group: "gruop1".into(),
            topic: None,
            json: false,
        };
        let mut out = Vec::new();
        let error = run(&Client::new(&server.url), offsets, &mut out).unwrap_err();
        assert!(out.is_empty());
        let error = error.to_string();
        assert!(
            error.starts_with("error: unknown group \"gruop1\": it has committed no offsets"),
            "{error}"
        );
        assert!(error.ends_with("; did you mean group1?"), "{error}");
        assert_eq!(server.requests()[1].target, "/v1/groups");
    }
}
