//! Command-line parsing shared by `sluicegate sim` and `sluicegate bench`: a refusal (or a help
//! request) becomes text to print and the exit code the command should end with.

use clap::Parser;

/// Arguments refused, or `--help`/`--version` asked for (exit code 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLineError {
    /// What to print, rendered as clap would print it.
    pub message: String,
    pub exit_code: i32,
}

impl From<clap::Error> for CommandLineError {
    fn from(e: clap::Error) -> Self {
        CommandLineError { message: e.render().to_string(), exit_code: e.exit_code() }
    }
}

/// Parse `args` (without the program name) as the command `name`.
pub fn parse<T: Parser>(name: &str, args: &[String]) -> Result<T, CommandLineError> {
    Ok(T::try_parse_from(std::iter::once(name.to_string()).chain(args.iter().cloned()))?)
}
