// The private copy of a database that a dry run and a lint run migrations
// on: made through the backup API while the database may be in use, into a
// temporary file this run owns.

enum ScratchCopy {
    /// Copies `database` into `copy`. A failure to write the copy names the
    /// database and says what the copy was for (`purpose`) and where.
    static func make(of database: String, into copy: TemporaryFile, in folder: String, timeout: Double, purpose: String) throws {
        do {
            let source = try HotCopy.openSource(database, timeout: timeout)
            defer { try? source.close() }
            var options = HotCopyOptions()
            options.timeout = timeout
            _ = try HotCopy.copy(from: source, into: copy.path, options: options)
        } catch var error as DatabaseError {
            if error.path == copy.path {
                error.path = database
                error.message = "cannot make the \(purpose) in \(folder): " + error.message
            }
            throw error
        }
    }
}
