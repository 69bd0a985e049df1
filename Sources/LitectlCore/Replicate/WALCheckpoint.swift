// The follower's own checkpoints (--checkpoint-frames): when the WAL loop
// checkpoints, and how, so that the application's -wal stays bounded while
// a read mark is held. Part of the replicate capability (the WAL loop's).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension WALLoop {
    func checkpointDeferral(_ header: WALIndexHeader) -> UInt32 {
        guard let gaveUp = checkpointGaveUp, header.sameGeneration(gaveUp) else { return 0 }
        return gaveUp.frame
    }

    /// (--checkpoint-frames) Whether the follower checkpoints now, with
    /// `mark` just taken: never while another process checkpoints, nor while
    /// more waits to be shipped than the shipper's limit (the follower is
    /// about to let its mark go). By default (`.auto`): once the
    /// application's own checkpoint copied frames of this generation of the
    /// -wal into the database file, but not all of them (the follower's mark
    /// held it back: without the follower it would have copied them all,
    /// and its next commit would have restarted the -wal), with the -wal at
    /// 1000 frames or more, unless the application ran a FULL, RESTART or
    /// TRUNCATE checkpoint of its own in the last 30 s (it manages its -wal,
    /// and the follower's checkpoint would only make one of its own return
    /// SQLITE_BUSY); and once the -wal holds 32 MiB whatever the application
    /// does. After a checkpoint that gave up, the next waits for twice the
    /// frames (`.frames(N)`: N more).
    func checkpointDue(_ mark: ReadMark) -> Bool {
        let header = mark.header
        guard options.checkpoint != .never, header.sameGeneration(chain.position), !marks.checkpointRunning,
              shipper.pendingBytes <= shipper.limit else { return false }
        let frames = header.maxFrame, deferral = checkpointDeferral(header)
        switch options.checkpoint {
        case .never:
            return false
        case .frames(let n):
            return frames >= UInt32(clamping: n) + deferral
        case .auto:
            guard frames >= 2 * deferral else { return false }
            let cap = UInt32(CheckpointPolicy.autoBytes / (24 + pageSize))
            if frames >= cap { return true }
            guard frames >= min(UInt32(CheckpointPolicy.autoFrames), cap), Clock.now() - marks.lastCheckpointSeen > 30,
                  let info = WALIndexHeader.checkpointInfo(marks.connection(of: mark)) else { return false }
            return info.backfilled > 0 && info.backfilled < frames
        }
    }

    /// (--checkpoint-frames) A checkpoint that restarts the -wal at the last
    /// state. First PASSIVE ones, which hold no commit of the application:
    /// each copies every frame up to the mark just taken into the database
    /// file; when no commit came meanwhile, that is every frame, and a mark
    /// taken then is at read lock 0, which lets the application's next commit
    /// restart the -wal (and the follower continue from it). After two, a
    /// RESTART checkpoint: it holds the write lock and copies the little that
    /// came since; while it waits for readers, the follower takes a new mark
    /// each time (reading the commits that came before the checkpoint took
    /// the write lock): at the last frame, then at read lock 0 once every
    /// frame is in the database file; the -wal then restarts at the last
    /// state, which the mark at lock 0 lets the follower continue from. It
    /// gives up once it has waited 50 ms for something other than the
    /// follower's mark (another reader holds an older snapshot), or 0.5 s in
    /// all. When another process runs a checkpoint (SQLITE_BUSY at once), the
    /// next look tries again.
    func checkpoint() throws {
        do {
            for _ in 0..<2 {
                guard let (log, copied) = marks.passiveCheckpoint() else { return }
                guard let mark = try marks.beginNext(attempts: 2) else { break }
                do { try advance(to: mark) } catch { marks.drop(mark); throw error }
                marks.hold(mark)
                if log > 0 && copied == log && mark.lockZero {
                    checkpointGaveUp = nil
                    return
                }
            }
        } catch is WALMismatch {
            // A frame that did not check is taken up again at the next look (a resync there).
            return
        }
        let started = Clock.now()
        var failure: (any Error)?
        // Since when the checkpoint waits for something other than this
        // follower's mark (its mark could go no further: at read lock 0, or
        // at the frame it already was): another reader, or the application's
        // write transaction. 50 ms of that, or 0.5 s in all, and it gives up.
        var othersSince: Double?
        let outcome = marks.restartCheckpoint { [self] in
            let now = Clock.now()
            guard failure == nil, now - started < 0.5, now - (othersSince ?? now) < 0.05 else { return false }
            let before = marks.held?.header
            do {
                if let mark = try marks.beginNext(attempts: 2) {
                    do { try advance(to: mark) } catch { marks.drop(mark); throw error }
                    marks.hold(mark)
                }
            } catch {
                failure = error
                return false
            }
            if othersSince == nil, let held = marks.held, held.lockZero || held.header == before { othersSince = Clock.now() }
            usleep(200)
            return true
        }
        switch outcome {
        case .restarted: checkpointGaveUp = nil
        case .gaveUp: checkpointGaveUp = marks.held?.header.position
        case .busy: break
        }
        // A frame that did not check is taken up again at the next poll (a
        // resync there), with the checkpoint out of the way.
        if let failure, !(failure is WALMismatch) { throw failure }
    }
}
