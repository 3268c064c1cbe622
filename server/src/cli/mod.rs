//! One module per subcommand.

pub mod compile;
