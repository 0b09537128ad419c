//! What a statement's `FROM` can name: the declared sources, every
//! derived stream as a schemaless stream over its output topic, and every
//! table defined by a query, through its defining query.

use kappa_processor::sql::{self, ObjectKind, SourceCatalog, SourceDecl};

use crate::views::catalog::Catalog;

/// The SQL planner's view of the catalog.
pub(super) struct Sources(pub Catalog);

impl SourceCatalog for Sources {
    fn source(&self, name: &str) -> Option<SourceDecl> {
        if let Some(decl) = self.0.sources.get(name) {
            return Some(decl.clone());
        }
        let view = self.0.views.get(name)?;
        let topic = view.output_topic()?;
        Some(SourceDecl {
            name: name.to_string(),
            kind: ObjectKind::Stream,
            columns: Vec::new(),
            topic: topic.to_string(),
            cluster: view.served.plan.sink_cluster.clone(),
            value_format: sql::defaults::VALUE_FORMAT.to_string(),
            timestamp: None,
            watermark_delay_ms: sql::defaults::WATERMARK_DELAY_MS,
            idle_timeout_ms: sql::defaults::IDLE_TIMEOUT_MS,
            partitions: None,
            sql: view.served.sql.clone().unwrap_or_default(),
        })
    }

    fn table_query(&self, name: &str) -> Option<String> {
        let view = self.0.views.get(name)?;
        if !view.is_table() {
            return None;
        }
        view.served.sql.clone()
    }
}
