//! The time-series CSV file (`--timeseries`): rows are written as the run closes each interval,
//! so memory does not grow with the run's length.
//!
//! The rows go to a temporary file in the destination's folder, renamed over the destination
//! only when the whole series is written: a run that fails (bad input found late, a full disk)
//! leaves neither a half-written series nor the temporary file (it is removed when dropped).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::SimError;

/// The header of the time-series CSV.
pub const SERIES_HEADER: &str = "time_ms,interval_ms,job,job_index,op,ios,bytes,iops,bytes_per_s,lat_mean_ns,lat_p99_ns,lat_p9999_ns,lat_max_ns,dispatch_lat_p99_ns,dispatch_lat_p9999_ns,dispatch_lat_max_ns";

/// Rows are formatted into this much memory before going to the file.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

fn write_error(path: &Path, e: io::Error) -> SimError {
    SimError {
        path: Some(path.to_path_buf()),
        line: None,
        message: format!("cannot write the time series: {e}"),
    }
}

/// A temporary file next to `dest`, hidden and named after it.
fn temp_next_to(dest: &Path) -> Result<NamedTempFile, SimError> {
    let folder = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "series".into());
    if !folder.is_dir() {
        return Err(SimError {
            path: Some(folder.to_path_buf()),
            line: None,
            message: "the folder does not exist".into(),
        });
    }
    // Named as qoslab.outputs names its temporaries (with the writer's pid), so that a run
    // into the same folder reclaims what a `kill -9` left.
    tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-{}-", std::process::id()))
        .suffix(".tmp")
        .tempfile_in(folder)
        // The OS's own words, without the name of a temporary file the user never asked for.
        .map_err(|e| {
            write_error(
                dest,
                e.raw_os_error().map_or(e, io::Error::from_raw_os_error),
            )
        })
}

/// A buffered writer whose errors name the series' destination.
pub struct SeriesWriter {
    dest: PathBuf,
    out: BufWriter<NamedTempFile>,
    /// With `--repeat`, the seed that starts each of this run's rows.
    seed_column: Option<u64>,
}

impl SeriesWriter {
    /// Writes `row` (no newline) and a newline.
    pub fn write_row(&mut self, row: std::fmt::Arguments<'_>) -> Result<(), SimError> {
        let out = &mut self.out;
        match self.seed_column {
            Some(seed) => writeln!(out, "{seed},{row}"),
            None => writeln!(out, "{row}"),
        }
        .map_err(|e| write_error(&self.dest, e))
    }

    fn finish(self) -> Result<NamedTempFile, SimError> {
        let dest = self.dest;
        self.out
            .into_inner()
            .map_err(|e| write_error(&dest, e.into_error()))
    }
}

/// The series file being written: the header, then every run's rows.
pub struct SeriesFile {
    writer: SeriesWriter,
}

impl SeriesFile {
    /// Starts the series at `dest` with its header (led by a `seed` column for several runs);
    /// fails at once if the folder cannot take it, before any simulation runs.
    pub fn create(dest: &Path, seed_column: bool) -> Result<Self, SimError> {
        if dest.is_dir() {
            return Err(SimError {
                path: Some(dest.to_path_buf()),
                line: None,
                message: "is a folder; expected the name of a file for the time series".into(),
            });
        }
        let mut writer = SeriesWriter {
            dest: dest.to_path_buf(),
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, temp_next_to(dest)?),
            seed_column: None,
        };
        let seed = if seed_column { "seed," } else { "" };
        writer.write_row(format_args!("{seed}{SERIES_HEADER}"))?;
        Ok(SeriesFile { writer })
    }

    pub fn writer(&mut self) -> &mut SeriesWriter {
        &mut self.writer
    }

    /// A scratch file for the rows of the run of `seed`, one of several written in parallel,
    /// appended with [`SeriesFile::append`] once they are done, so the rows keep the order of
    /// the seeds.
    pub fn part(&self, seed: u64) -> Result<SeriesWriter, SimError> {
        let dest = &self.writer.dest;
        Ok(SeriesWriter {
            dest: dest.clone(),
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, temp_next_to(dest)?),
            seed_column: Some(seed),
        })
    }

    /// Appends a finished part (and removes its scratch file).
    pub fn append(&mut self, part: SeriesWriter) -> Result<(), SimError> {
        let dest = self.writer.dest.clone();
        let tmp = part.finish()?;
        let mut file: &File = tmp.as_file();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| io::copy(&mut BufReader::new(file), &mut self.writer.out))
            .map_err(|e| write_error(&dest, e))?;
        Ok(())
    }

    /// Flushes the rows and renames the file over the destination.
    pub fn persist(self) -> Result<(), SimError> {
        let dest = self.writer.dest.clone();
        let tmp = self.writer.finish()?;
        tmp.persist(&dest)
            .map_err(|e| write_error(&dest, e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn parts_are_appended_in_order_and_nothing_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("s.csv");
        let mut file = SeriesFile::create(&dest, true).unwrap();
        let mut first = file.part(7).unwrap();
        let mut second = file.part(8).unwrap();
        second.write_row(format_args!("x")).unwrap();
        first.write_row(format_args!("y")).unwrap();
        first.write_row(format_args!("z")).unwrap();
        file.append(first).unwrap();
        file.append(second).unwrap();
        assert!(!dest.exists(), "the destination appears only when complete");
        file.persist().unwrap();
        assert_eq!(
            std::fs::read_to_string(&dest).unwrap(),
            format!("seed,{SERIES_HEADER}\n7,y\n7,z\n8,x\n")
        );
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_dropped_series_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("s.csv");
        let mut file = SeriesFile::create(&dest, false).unwrap();
        file.writer().write_row(format_args!("1")).unwrap();
        let part = file.part(1).unwrap();
        assert_eq!(leftovers(dir.path()).len(), 2);
        drop(part);
        drop(file);
        assert!(!dest.exists());
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_missing_folder_is_one_error_naming_it() {
        let dest = Path::new("/nonexistent-qoslab-folder/s.csv");
        let err = SeriesFile::create(dest, false).err().unwrap();
        assert_eq!(
            err.to_string(),
            "/nonexistent-qoslab-folder: the folder does not exist"
        );
    }
}
