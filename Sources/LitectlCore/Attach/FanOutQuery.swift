// Runs one query on many database files in parallel, each read-only on its own
// connection, and writes one combined result with a leading `db` column in path
// order. No ATTACH, so there is no limit on the number of files.
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `litectl query --each`: the same script on every file.
public enum FanOutQuery {
    /// Fails when `script` has a syntax error, found by preparing it on an
    /// empty in-memory database: such an error would otherwise be reported
    /// once per file. (Errors that depend on a file's schema, such as an
    /// unknown table, are left to each file.)
    public static func checkSyntax(_ script: String) throws {
        let scratch = try Connection(inMemory: 0)
        do {
            try scratch.forEachStatement(in: script) { _ in }
        } catch var error as DatabaseError {
            let message = error.message
            guard message.hasPrefix("near \"") || message.contains("syntax error") || message.contains("incomplete input")
                    || message.contains("unrecognized token") else { return }
            error.path = nil
            throw error
        }
    }

    /// The files that `patterns` name: a pattern with `*`, `?` or `[` is a
    /// glob (matches sorted), anything else a path kept as given (a missing
    /// one fails when it is run). Duplicates are removed; the result is sorted
    /// by path bytes. `unmatched` lists globs that matched nothing.
    public static func expand(_ patterns: [String]) -> (paths: [String], unmatched: [String]) {
        var paths: [String] = []
        var unmatched: [String] = []
        for pattern in patterns {
            guard pattern.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" }) else {
                paths.append(pattern)
                continue
            }
            var result = glob_t()
            defer { globfree(&result) }
            let rc = glob(pattern, 0, nil, &result)
            guard rc == 0 else { unmatched.append(pattern); continue }
            for i in 0..<Int(result.gl_pathc) {
                if let p = result.gl_pathv[i] { paths.append(String(cString: p)) }
            }
        }
        var seen = Set<String>()
        paths = paths.filter { seen.insert($0).inserted }
        paths.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return (paths, unmatched)
    }

    /// One file's results, held until its turn in path order.
    struct Outcome: Sendable {
        var results: [(columns: [String], rows: [[Value]])] = []
        var error: DatabaseError?
    }

    /// Runs `script` on every file of `paths` with up to `jobs` files open at
    /// once, and writes the rows of each result-returning statement into
    /// `writer` as one combined result (the file's path first, in a `db`
    /// column), files in the order of `paths`. The first statement streams out
    /// as files finish in order; later statements follow once every file is done.
    ///
    /// A file that fails (missing, not a database, an SQL error, a result
    /// whose column count differs from the first file's) is reported through
    /// `onFailure` with its path and contributes no rows; the others still run.
    /// Returns the number of files that failed.
    public static func run(paths: [String], script: String, parameters: QueryParameters = QueryParameters(),
                           jobs: Int, busyTimeout: Int = Connection.defaultBusyTimeout,
                           maximumResults: Int? = nil,
                           into writer: RowWriter, onFailure: (String, DatabaseError) -> Void) throws -> Int {
        let slots = Slots(count: paths.count)
        let group = DispatchGroup()
        for _ in 0..<max(1, min(jobs, paths.count)) {
            DispatchQueue.global().async(group: group) {
                while let index = slots.claim() {
                    slots.store(runOne(paths[index], script: script, parameters: parameters, busyTimeout: busyTimeout),
                                at: index)
                }
            }
        }
        defer {
            slots.cancel()
            group.wait()
        }

        var failures = 0
        var reference: [[String]]?   // column names per result, from the first good file
        var later: [(path: String, results: [[[Value]]])] = []
        var begun = false
        for index in paths.indices {
            var outcome = slots.take(index)
            let path = paths[index]
            if outcome.error == nil, let reference {
                let expected = reference.map(\.count), found = outcome.results.map(\.columns.count)
                if expected != found {
                    outcome.error = DatabaseError(
                        code: .error,
                        message: "results have \(found) columns where the first file's have \(expected)", path: path)
                }
            }
            if let error = outcome.error {
                failures += 1
                onFailure(path, error)
                continue
            }
            if reference == nil {
                // An output that holds one result (CSV) is refused before anything is written.
                if let maximumResults, outcome.results.count > maximumResults {
                    throw SeveralResults(count: outcome.results.count, statementSQL: nil)
                }
                reference = outcome.results.map(\.columns)
            }
            guard let first = outcome.results.first else { continue }
            if !begun {
                writer.begin(columns: ["db"] + first.columns)
                begun = true
            }
            let pathValue = Value.text(path)
            for row in first.rows { writer.write([pathValue] + row) }
            later.append((path, outcome.results.dropFirst().map(\.rows)))
        }
        if begun { writer.finish() }
        if let reference, reference.count > 1 {
            for statement in 1..<reference.count {
                writer.begin(columns: ["db"] + reference[statement])
                for file in later {
                    let pathValue = Value.text(file.path)
                    for row in file.results[statement - 1] { writer.write([pathValue] + row) }
                }
                writer.finish()
            }
        }
        return failures
    }

    /// A script that returns more results than the output can hold (one, for CSV).
    public struct SeveralResults: Error, Sendable {
        /// How many results the script gives (at least).
        public var count: Int
        /// The statement that begins the result too many, when known.
        public var statementSQL: String?
        public init(count: Int, statementSQL: String?) {
            self.count = count
            self.statementSQL = statementSQL
        }
    }

    /// Opens `path` read-only on a connection of its own and collects every result.
    static func runOne(_ path: String, script: String, parameters: QueryParameters, busyTimeout: Int) -> Outcome {
        var outcome = Outcome()
        do {
            let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
            try AttachedSession.run(script, on: connection, writable: false, parameters: parameters) { result in
                var rows: [[Value]] = []
                let count = result.statement.columnCount
                try result.forEachRow { row in rows.append((0..<count).map { row.value(at: $0) }) }
                outcome.results.append((result.columns, rows))
            }
            try connection.close()
        } catch var error as DatabaseError {
            if error.path == nil { error.path = path }
            outcome.error = error
            outcome.results = []
        } catch {
            outcome.error = DatabaseError(code: .error, message: "\(error)", path: path)
            outcome.results = []
        }
        return outcome
    }

    /// Results by file index, handed from the worker tasks to the writer, with
    /// the next index to claim; guarded by one mutex and condition.
    final class Slots: @unchecked Sendable {
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        private var outcomes: [Outcome?]
        private var next = 0
        private var cancelled = false

        init(count: Int) {
            outcomes = Array(repeating: nil, count: count)
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }

        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            condition.deallocate()
        }

        /// The next file index to run, or nil when all are claimed or the run stopped.
        func claim() -> Int? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard !cancelled, next < outcomes.count else { return nil }
            next += 1
            return next - 1
        }

        func store(_ outcome: Outcome, at index: Int) {
            pthread_mutex_lock(mutex)
            outcomes[index] = outcome
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }

        /// Waits for file `index`'s outcome and takes it out (freeing its memory).
        func take(_ index: Int) -> Outcome {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while outcomes[index] == nil { pthread_cond_wait(condition, mutex) }
            let outcome = outcomes[index]!
            outcomes[index] = nil
            return outcome
        }

        func cancel() {
            pthread_mutex_lock(mutex)
            cancelled = true
            pthread_mutex_unlock(mutex)
        }
    }
}
