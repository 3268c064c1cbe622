//! `webtune space`: the lite space a device would be given, in order.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use webtune_tuner::{Device, Fingerprint, Settings, lite_space, presets};

use super::args::KernelArgs;

#[derive(Args, Debug)]
pub struct SpaceArgs {
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// A fingerprint JSON file in the client's format, or a preset name
    /// (h100, swiftshader, xeon-2core, apple-m2, pixel-8).
    #[arg(long)]
    pub device: String,
    /// Print one JSON object of statistics instead of the candidates.
    #[arg(long)]
    pub stats: bool,
    /// A settings file written by `webtune microbench` (default: the built-in verdicts).
    #[arg(long)]
    pub settings: Option<PathBuf>,
}

pub(crate) fn fingerprint(device: &str) -> Result<Fingerprint> {
    if let Some(fp) = presets::get(device) {
        return Ok(fp);
    }
    let path = std::path::Path::new(device);
    if !path.exists() {
        bail!("--device `{device}` is neither a file nor a preset ({})", presets::names().join(", "));
    }
    let text = crate::cli::read_input(path, "fingerprint file")?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{device}: fingerprint JSON: {e}"))?;
    // A body of `POST /v1/sessions`, `{"fingerprint": {...}}`, is taken for
    // the fingerprint it holds (it used to read as an empty fingerprint).
    let v = match v.as_object() {
        Some(o) if o.len() == 1 && o.contains_key("fingerprint") => o["fingerprint"].clone(),
        _ => v,
    };
    Fingerprint::from_value(&v).map_err(|e| anyhow::anyhow!("{device}: {e}"))
}

pub fn run(a: SpaceArgs) -> Result<()> {
    let (op, target) = a.kernel.parse()?;
    let mut fp = fingerprint(&a.device)?;
    // The space is for the target asked for, whatever the file's own target.
    fp.target = Some(target.name().to_string());
    let keys = fp.keys().map_err(|e| anyhow::anyhow!("{}: {e}", a.device))?;
    let device = Device::from_keys(&keys);
    let settings = match &a.settings {
        None => Settings::builtin(target),
        Some(path) => {
            let text = crate::cli::read_input(path, "settings file")?;
            let (s, ignored) = Settings::from_microbench_json(&text).map_err(anyhow::Error::msg)?;
            if s.target != target {
                bail!("settings file {} is for target {}, not {target}", path.display(), s.target);
            }
            if !ignored.is_empty() {
                eprintln!("webtune space: the space builder does not set {}; ignored", ignored.join(", "));
            }
            s
        }
    };
    let space = lite_space(&op, target, &device, &settings);
    if a.stats {
        let stats = serde_json::json!({
            "op": op.name(),
            "shape": op.shape(),
            "target": target.name(),
            "device_key": keys.device_key,
            "arch_key": keys.arch_key,
            "vendor_key": keys.vendor_key,
            "model": device.model_name(target),
            "naive_size": space.naive_size,
            "lite_size": space.schedules.len(),
            "survivors": space.survivors,
            "checksum": space.checksum,
            "rules_checksum": webtune_tuner::rules_checksum(&op, target, &settings),
            "relaxation": space.relaxation,
        });
        crate::cli::out(stats)?;
    } else {
        for s in &space.schedules {
            crate::cli::out(serde_json::to_string(s)?)?;
        }
    }
    Ok(())
}
