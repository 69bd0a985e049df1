// litectl's version, shown by --version.
enum LitectlVersion {
    static let string = "0.1.0"
}
