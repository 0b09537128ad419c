//! Kappa tools library part (filled by the tools issue).
