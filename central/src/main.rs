use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = central::config::Cli::parse();
    central::telemetry::init();
    match central::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) if error.is::<central::Drift>() => std::process::ExitCode::from(2),
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("central: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
