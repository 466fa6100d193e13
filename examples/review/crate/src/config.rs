//! The daemon's configuration, from the environment.

/// The port to listen on (`PORT`).
pub fn port() -> u16 {
    std::env::var("PORT").unwrap().parse().unwrap()
}
