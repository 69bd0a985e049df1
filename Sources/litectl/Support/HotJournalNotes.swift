// The -v note of a read that met a hot rollback journal: the core tells of
// each private copy of a committed state it makes (HotJournal.report), and
// this prints it as one line on stderr. Without -v nothing is said (`check`
// reports a hot journal as a finding of its own).
import LitectlCore

/// Prints a `note:` line on stderr for each hot journal met from now on, with -v.
func noteHotJournals(_ voice: VoiceOptions) {
    guard voice.verbose else { return HotJournal.report(to: nil) }
    let note: @Sendable (HotJournalCopy) -> Void = { copy in printError("note: " + copy.description) }
    HotJournal.report(to: note)
}
