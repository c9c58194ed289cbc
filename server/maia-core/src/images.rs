//! Images in a conversation: where their bytes are kept, what the model's
//! history says of them, and whether a model is shown them at all.
//!
//! - **Storage.** The journal stays small: an image's bytes are written
//!   once, content-addressed, to `<cwd>/.maia/.sessions/images/<sha256>.<ext>`,
//!   and records refer to them by [`ImageRef`] (a replay reads them back).
//! - **Ephemeral in the history.** The model-facing history holds a short
//!   text stand-in ([`stand_in`]: name, type, size, the turn it was shown
//!   in); the bytes go with the requests of that turn only (the session's
//!   per-turn overlay), so an image is never resent turn after turn.
//! - **Vision.** A model is shown images only when it is known to accept
//!   them ([`sees_images`]): the `visionModels` setting, else LiteLLM's
//!   `/model/info` `supports_vision`, else the model list; unknown counts as
//!   no. Otherwise the user is told and the model gets a note instead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maia_llm::LlmClient;
use maia_tools::ImageData;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// A stored image, as journal records name it (part of the journal format,
/// so it lives with [`crate::store`]).
pub use crate::store::ImageRef;

/// The folder of a working folder's stored images.
pub fn images_dir(cwd: &Path) -> PathBuf {
    crate::store::sessions_dir(cwd).join("images")
}

fn extension(mime_type: &str) -> &'static str {
    match mime_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "bin",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn blob_path(cwd: &Path, sha256: &str, mime_type: &str) -> Option<PathBuf> {
    // Names come from journals: only a hash is a file name.
    (sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| images_dir(cwd).join(format!("{sha256}.{}", extension(mime_type))))
}

/// Writes `image` under its hash (once: an existing file is kept) and
/// returns its reference.
pub fn store(cwd: &Path, image: &ImageData) -> std::io::Result<ImageRef> {
    let sha256 = hex(&Sha256::digest(&image.bytes));
    let reference = ImageRef {
        sha256: sha256.clone(),
        mime_type: image.mime_type.to_owned(),
        name: image.name.clone(),
        bytes: image.bytes.len() as u64,
        width: image.width,
        height: image.height,
    };
    let Some(path) = blob_path(cwd, &sha256, image.mime_type) else {
        return Err(std::io::Error::other("bad image hash"));
    };
    // Already stored: made fresh again, so a cleanup that read the journals
    // before this one records the image keeps it (see [`remove_unreferenced`]).
    if path.is_file()
        && std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
            .is_ok()
    {
        return Ok(reference);
    }
    let dir = images_dir(cwd);
    std::fs::create_dir_all(&dir)?;
    if std::fs::symlink_metadata(&dir)?.file_type().is_symlink() {
        return Err(std::io::Error::other(
            "the image folder is a symbolic link; nothing is written through it",
        ));
    }
    // A temporary name of its own: two sessions may store the same image at
    // once; the second rename replaces the first with the same bytes.
    let tmp = dir.join(format!(".{sha256}.{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, &image.bytes)?;
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(reference)
}

/// The bytes of a stored image, if the file is there and still has them.
/// Only a regular file (not a link, FIFO or device: the folder is inside
/// the project, where a command may have put anything) within the image
/// size limit, holding an image of the recorded type, is read.
pub fn load(cwd: &Path, reference: &ImageRef) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = blob_path(cwd, &reference.sha256, &reference.mime_type)?;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let limit = maia_tools::image::MAX_IMAGE_BYTES as u64;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= limit
        && maia_tools::image::sniff(&bytes) == Some(reference.mime_type.as_str())
        && hex(&Sha256::digest(&bytes)) == reference.sha256)
        .then_some(bytes)
}

/// Removes the stored images no journal of `cwd` names any more (after a
/// session was deleted). An image stored in the last minute is kept: its
/// record may be on its way. Returns how many files were removed.
pub fn remove_unreferenced(cwd: &Path) -> usize {
    // The folder is inside the project: a link there may lead anywhere, and
    // nothing is removed through it.
    let dir = images_dir(cwd);
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return 0;
    }
    let Ok(blobs) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut named = std::collections::HashSet::new();
    if let Ok(journals) = std::fs::read_dir(crate::store::sessions_dir(cwd)) {
        for journal in journals.flatten() {
            let path = journal.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                // Unreadable now: keep every image rather than lose one.
                return 0;
            };
            for (at, _) in text.match_indices("\"sha256\":\"") {
                if let Some(hash) = text.get(at + 10..at + 74) {
                    named.insert(hash.to_owned());
                }
            }
        }
    }
    let recent = std::time::Duration::from_secs(60);
    let mut removed = 0;
    for blob in blobs.flatten() {
        let path = blob.path();
        let Some(hash) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let fresh = blob
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < recent));
        if hash.len() == 64
            && hash.bytes().all(|b| b.is_ascii_hexdigit())
            && blob.file_type().is_ok_and(|t| t.is_file())
            && !named.contains(hash)
            && !fresh
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// What the history keeps of an image shown to the model in `turn`.
pub fn stand_in(image: &ImageData, turn: usize) -> String {
    format!(
        "[Image {} ({}), shown in turn {turn}; an image is visible only in the turn it is shown in]",
        image.name,
        image.describe()
    )
}

/// What the model is told of an image its model cannot be shown.
pub fn not_shown(image: &ImageData, model: &str) -> String {
    format!(
        "[Image {} ({}) not shown: the model {model} does not accept images]",
        image.name,
        image.describe()
    )
}

/// What the user is told when images cannot be shown to `model`.
pub fn not_shown_to_user(count: usize, model: &str, vision: Vision) -> String {
    let what = if count == 1 {
        "The image was".to_owned()
    } else {
        format!("The {count} images were")
    };
    let why = match vision {
        Vision::No(source) => format!("the model `{model}` does not accept images ({source})"),
        Vision::Yes(_) | Vision::Unknown => format!(
            "MAIA does not know whether the model `{model}` accepts images (neither `/model/info` nor the model list says so)"
        ),
    };
    format!(
        "**{what} not sent**: {why}. Choose a vision model, or list this one in `visionModels` in .maia/settings.json if it accepts images.\n\n"
    )
}

/// Whether a model is shown images, and who said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vision {
    Yes(&'static str),
    No(&'static str),
    Unknown,
}

impl Vision {
    pub fn sees(self) -> bool {
        matches!(self, Vision::Yes(_))
    }
}

/// What the endpoint said about vision, asked once per session and only
/// when an image is about to be sent.
#[derive(Debug)]
pub(crate) struct VisionCache {
    model_info: OnceCell<HashMap<String, bool>>,
    /// The process's model lists (see [`crate::catalogue`]).
    catalogue: Arc<crate::catalogue::ModelCatalogue>,
}

impl VisionCache {
    /// A cache that reads the models list from `catalogue`.
    pub(crate) fn new(catalogue: Arc<crate::catalogue::ModelCatalogue>) -> Self {
        VisionCache {
            model_info: OnceCell::new(),
            catalogue,
        }
    }
}

/// Whether `model` is shown images: the `visionModels` setting, else
/// `/model/info` (`prefetched`: what the window discovery's copy of it says
/// for `model`, else asked here), else the model list, else unknown.
pub(crate) async fn sees_images(
    cache: &VisionCache,
    llm: &LlmClient,
    model: &str,
    manual: &HashMap<String, bool>,
    prefetched: Option<bool>,
    cancel: &CancellationToken,
) -> Vision {
    if let Some(&vision) = manual.get(model) {
        return if vision {
            Vision::Yes("visionModels")
        } else {
            Vision::No("visionModels says so")
        };
    }
    // `/model/info` as the window discovery already read it: no second request.
    if let Some(vision) = prefetched {
        return if vision {
            Vision::Yes("/model/info")
        } else {
            Vision::No("`/model/info` says `supports_vision: false`")
        };
    }
    // A cancelled question is not remembered: the next image asks again.
    let Ok(info) = cache
        .model_info
        .get_or_try_init(|| async {
            tokio::select! {
                () = cancel.cancelled() => Err(()),
                info = llm.model_info() => Ok(info.map(|entries| {
                    entries
                        .into_iter()
                        .filter_map(|(name, entry)| Some((name, entry.supports_vision?)))
                        .collect()
                }).unwrap_or_else(|e| {
                    tracing::debug!(error = %e, "no vision information from /model/info");
                    HashMap::new()
                })),
            }
        })
        .await
    else {
        return Vision::Unknown;
    };
    if let Some(&vision) = info.get(model) {
        return if vision {
            Vision::Yes("/model/info")
        } else {
            Vision::No("`/model/info` says `supports_vision: false`")
        };
    }
    // A failed or cancelled list is not remembered: the next image asks again.
    let Ok(list) = cache.catalogue.list(llm, cancel).await else {
        return Vision::Unknown;
    };
    match list
        .iter()
        .find(|m| m.id == model)
        .and_then(|m| m.supports_vision)
    {
        Some(true) => Vision::Yes("the model list"),
        Some(false) => Vision::No("the model list says so"),
        None => Vision::Unknown,
    }
}

/// The history message a turn's images belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// The user message with this text (its stand-ins name the turn, so it
    /// is unique).
    User(String),
    /// The result of this tool call; its images follow the turn's tool
    /// results as a user message (a tool message carries text only).
    Tool(String),
}

/// The images shown during the current turn, by the message they belong to.
pub(crate) type Overlay = Vec<(Anchor, Vec<ImageData>)>;

/// The text that introduces images returned by tools.
pub const TOOL_IMAGES_INTRO: &str = "(Images returned by the tool calls above.)";

fn llm_images(images: &[ImageData]) -> Vec<maia_llm::Image> {
    images
        .iter()
        .map(|i| maia_llm::Image {
            mime_type: i.mime_type.to_owned(),
            data: i.bytes.clone(),
        })
        .collect()
}

/// The messages of a request: `messages` with the current turn's images
/// put back where they belong.
pub(crate) fn with_images(
    messages: Vec<maia_llm::ChatMessage>,
    overlay: &Overlay,
) -> Vec<maia_llm::ChatMessage> {
    use maia_llm::ChatMessage;
    if overlay.is_empty() {
        return messages;
    }
    let find = |anchor: Anchor| {
        overlay
            .iter()
            .find(|(a, _)| *a == anchor)
            .map(|(_, images)| llm_images(images))
    };
    let mut out = Vec::with_capacity(messages.len() + 1);
    let mut from_tools: Vec<maia_llm::Image> = Vec::new();
    let flush = |out: &mut Vec<ChatMessage>, from_tools: &mut Vec<maia_llm::Image>| {
        if !from_tools.is_empty() {
            out.push(ChatMessage::User {
                content: TOOL_IMAGES_INTRO.to_owned(),
                images: std::mem::take(from_tools),
            });
        }
    };
    for message in messages {
        match message {
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                if let Some(images) = find(Anchor::Tool(tool_call_id.clone())) {
                    from_tools.extend(images);
                }
                out.push(ChatMessage::Tool {
                    tool_call_id,
                    content,
                });
            }
            ChatMessage::User { content, images } => {
                flush(&mut out, &mut from_tools);
                let images = match find(Anchor::User(content.clone())) {
                    Some(mut found) => {
                        found.extend(images);
                        found
                    }
                    None => images,
                };
                out.push(ChatMessage::User { content, images });
            }
            other => {
                flush(&mut out, &mut from_tools);
                out.push(other);
            }
        }
    }
    flush(&mut out, &mut from_tools);
    out
}

/// The images of `overlay` one request can carry: the newest, at most
/// [`MAX_IMAGES_PER_MESSAGE`](maia_tools::image::MAX_IMAGES_PER_MESSAGE)
/// and [`MAX_MESSAGE_IMAGE_BYTES`](maia_tools::image::MAX_MESSAGE_IMAGE_BYTES)
/// together. A turn that shows images step after step (screenshots) would
/// otherwise send all of them with every request, past the providers'
/// limits; older ones keep their stand-in text.
pub(crate) fn within_request_limits(overlay: &Overlay) -> Overlay {
    use maia_tools::image::{MAX_IMAGES_PER_MESSAGE, MAX_MESSAGE_IMAGE_BYTES};
    let (mut count, mut bytes) = (0usize, 0usize);
    let mut kept: Overlay = Vec::with_capacity(overlay.len());
    for (anchor, images) in overlay.iter().rev() {
        let mut newest = Vec::new();
        for image in images.iter().rev() {
            if count < MAX_IMAGES_PER_MESSAGE
                && bytes + image.bytes.len() <= MAX_MESSAGE_IMAGE_BYTES
            {
                count += 1;
                bytes += image.bytes.len();
                newest.push(image.clone());
            }
        }
        if !newest.is_empty() {
            newest.reverse();
            kept.push((anchor.clone(), newest));
        }
    }
    kept.reverse();
    kept
}

/// Tokens of the images in `overlay` ([`maia_tools::image::token_cost`]).
pub(crate) fn overlay_tokens(overlay: &Overlay) -> u64 {
    overlay
        .iter()
        .flat_map(|(_, images)| images)
        .map(ImageData::tokens)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use maia_llm::{ChatMessage, ToolCall};

    #[test]
    fn images_go_back_where_they_belong() {
        let img =
            maia_tools::image::image("a.png", maia_tools::image::test_png(4, 3), None).unwrap();
        let overlay: Overlay = vec![
            (Anchor::User("look [Image a.png]".into()), vec![img.clone()]),
            (Anchor::Tool("c1".into()), vec![img.clone(), img.clone()]),
        ];
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "Read".into(),
            arguments: "{}".into(),
        };
        let history = vec![
            ChatMessage::user("earlier [Image a.png]"),
            ChatMessage::user("look [Image a.png]"),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![call("c1"), call("c2")],
            },
            ChatMessage::tool("c1", "a.png is an image"),
            ChatMessage::tool("c2", "text"),
        ];
        let out = with_images(history, &overlay);
        let counts: Vec<(&str, usize)> = out
            .iter()
            .map(|m| match m {
                ChatMessage::User { images, .. } => ("user", images.len()),
                other => (other.role(), 0),
            })
            .collect();
        assert_eq!(
            counts,
            [
                ("user", 0),
                ("user", 1),
                ("assistant", 0),
                ("tool", 0),
                ("tool", 0),
                ("user", 2)
            ]
        );
        assert_eq!(overlay_tokens(&overlay), 3 * 255);
    }

    #[test]
    fn stored_once_by_hash_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let image =
            maia_tools::image::image("a.png", maia_tools::image::test_png(4, 3), None).unwrap();
        let r = store(dir.path(), &image).unwrap();
        assert_eq!(r.sha256.len(), 64);
        assert_eq!(
            (r.width, r.height, r.mime_type.as_str()),
            (4, 3, "image/png")
        );
        assert_eq!(store(dir.path(), &image).unwrap(), r);
        assert_eq!(load(dir.path(), &r).as_deref(), Some(image.bytes.as_ref()));
        let files: Vec<_> = std::fs::read_dir(images_dir(dir.path())).unwrap().collect();
        assert_eq!(files.len(), 1);
        // A changed file or a forged name is not read.
        let path = images_dir(dir.path()).join(format!("{}.png", r.sha256));
        std::fs::write(&path, b"other").unwrap();
        assert_eq!(load(dir.path(), &r), None);
        let forged = ImageRef {
            sha256: "../../x".into(),
            ..r.clone()
        };
        assert_eq!(load(dir.path(), &forged), None);
        // Unreferenced but just stored: kept; named by a journal: kept;
        // else removed.
        assert_eq!(remove_unreferenced(dir.path()), 0);
        let blob = images_dir(dir.path()).join(format!("{}.png", r.sha256));
        let age = |path: &Path| {
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        age(&blob);
        let journal = crate::store::sessions_dir(dir.path()).join("t.jsonl");
        let record = crate::store::Record::UserImage { image: r.clone() };
        std::fs::write(&journal, serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(remove_unreferenced(dir.path()), 0);
        std::fs::remove_file(&journal).unwrap();
        assert_eq!(remove_unreferenced(dir.path()), 1);
        assert!(!blob.exists());
        store(dir.path(), &image).unwrap();
        assert!(stand_in(&image, 3).contains("a.png (image/png, 4×3, 45 bytes), shown in turn 3"));
    }

    #[test]
    fn only_a_stored_image_file_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let image =
            maia_tools::image::image("a.png", maia_tools::image::test_png(4, 3), None).unwrap();
        let r = store(dir.path(), &image).unwrap();
        let path = images_dir(dir.path()).join(format!("{}.png", r.sha256));
        // A FIFO in its place (a command could make one): no hang.
        std::fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let (cwd, reference) = (dir.path().to_owned(), r.clone());
        std::thread::spawn(move || {
            let _ = tx.send(load(&cwd, &reference));
        });
        let loaded = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(loaded, Ok(None), "a FIFO must not be waited on");
        // A link to the right bytes elsewhere: not followed.
        std::fs::remove_file(&path).unwrap();
        let outside = dir.path().join("outside.png");
        std::fs::write(&outside, &image.bytes).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        assert_eq!(load(dir.path(), &r), None);
        // The right bytes under a record that lies about their type: refused.
        std::fs::remove_file(&path).unwrap();
        let lying = ImageRef {
            mime_type: "text/html".into(),
            ..r.clone()
        };
        let bin = images_dir(dir.path()).join(format!("{}.bin", r.sha256));
        std::fs::write(&bin, &image.bytes).unwrap();
        assert_eq!(load(dir.path(), &lying), None);
    }

    #[test]
    fn storing_an_image_again_keeps_it_from_a_concurrent_cleanup() {
        let dir = tempfile::tempdir().unwrap();
        let image =
            maia_tools::image::image("a.png", maia_tools::image::test_png(4, 3), None).unwrap();
        let r = store(dir.path(), &image).unwrap();
        let blob = images_dir(dir.path()).join(format!("{}.png", r.sha256));
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        std::fs::File::options()
            .write(true)
            .open(&blob)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Another session stores the same image; its record is not written
        // yet when a deleted session's cleanup runs.
        store(dir.path(), &image).unwrap();
        assert_eq!(remove_unreferenced(dir.path()), 0);
        assert!(blob.is_file());
    }

    #[test]
    fn a_request_carries_the_newest_images_within_the_limits() {
        let image = |i: u32| {
            maia_tools::image::image(
                &format!("s{i}.png"),
                maia_tools::image::test_png(i + 1, 1),
                None,
            )
            .unwrap()
        };
        // 25 tool steps of one turn, a screenshot each.
        let overlay: Overlay = (0..25)
            .map(|i| (Anchor::Tool(format!("c{i}")), vec![image(i)]))
            .collect();
        let kept = within_request_limits(&overlay);
        let names: Vec<String> = kept
            .iter()
            .flat_map(|(_, images)| images.iter().map(|i| i.name.clone()))
            .collect();
        assert_eq!(names.len(), maia_tools::image::MAX_IMAGES_PER_MESSAGE);
        assert_eq!(names.first().map(String::as_str), Some("s5.png"));
        assert_eq!(names.last().map(String::as_str), Some("s24.png"));
        // After a compaction they all sit on the kept prompt: the same cap.
        let all = vec![(
            Anchor::User("p".into()),
            overlay.into_iter().flat_map(|(_, i)| i).collect::<Vec<_>>(),
        )];
        let kept = within_request_limits(&all);
        assert_eq!(kept[0].1.len(), maia_tools::image::MAX_IMAGES_PER_MESSAGE);
        assert_eq!(kept[0].1[0].name, "s5.png");
        let few = vec![(Anchor::User("p".into()), vec![image(1), image(2)])];
        assert_eq!(within_request_limits(&few), few);
    }

    #[test]
    fn cleanup_removes_nothing_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let victim = elsewhere.path().join(format!("{}.png", "a".repeat(64)));
        std::fs::write(&victim, b"not ours").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        std::fs::File::options()
            .write(true)
            .open(&victim)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::create_dir_all(crate::store::sessions_dir(dir.path())).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), images_dir(dir.path())).unwrap();
        assert_eq!(remove_unreferenced(dir.path()), 0);
        assert!(victim.is_file());
        let image =
            maia_tools::image::image("a.png", maia_tools::image::test_png(4, 3), None).unwrap();
        assert!(store(dir.path(), &image).is_err());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1);
        // Nor a link inside the real folder.
        std::fs::remove_file(images_dir(dir.path())).unwrap();
        std::fs::create_dir_all(images_dir(dir.path())).unwrap();
        let link = images_dir(dir.path()).join(format!("{}.png", "b".repeat(64)));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert_eq!(remove_unreferenced(dir.path()), 0);
        assert!(victim.is_file());
    }
}
