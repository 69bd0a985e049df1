// Tables whose shape a file format's specification prescribes: a GeoPackage's
// gpkg_* tables, an MBTiles file's metadata and tiles (and the tables the
// common MBTiles writers keep behind a tiles view). `check` reports its lint
// findings on them as notes: gpkg_extensions has no PRIMARY KEY because the
// GeoPackage standard defines it so, and adding one would leave the format.
// See https://www.geopackage.org/spec/ and https://github.com/mapbox/mbtiles-spec

struct SpecificationTables: Sendable {
    static let none = SpecificationTables(format: nil, tables: [])

    /// "GeoPackage" or "MBTiles"; nil when the file is neither.
    let format: String?
    /// The tables the format defines, as `sqlNameKey`s.
    let tables: Set<[UInt8]>

    private init(format: String?, tables: Set<[UInt8]>) {
        self.format = format
        self.tables = tables
    }

    /// GeoPackage application_ids: "GPKG" (1.2 and later), "GP10", "GP11".
    static let geoPackageIDs: Set<Int64> = [0x4750_4B47, 0x4750_3130, 0x4750_3131]

    /// Recognizes the format from the schema and the header's application_id.
    /// - GeoPackage: application_id GPKG, GP10 or GP11, or both
    ///   gpkg_spatial_ref_sys and gpkg_contents present. Its tables: every
    ///   ordinary table named gpkg_* (the standard reserves the prefix for its
    ///   own tables and its registered extensions').
    /// - MBTiles: a `metadata` table with columns name and value and a `tiles`
    ///   table or view with columns zoom_level, tile_column, tile_row and
    ///   tile_data. Its tables: metadata, and tiles, grids and grid_data when
    ///   they are tables; when one of them is a view (which the specification
    ///   allows), the tables that view reads (mbutil's and node-mbtiles' map,
    ///   images, grid_key, keymap, grid_utfgrid).
    init(schema: Schema, applicationID: Int64) {
        let ordinary = schema.tables.filter { $0.kind == .ordinary }
        func has(_ name: String) -> Bool { ordinary.contains { sameSQLName($0.name, name) } }
        if Self.geoPackageIDs.contains(applicationID) || (has("gpkg_spatial_ref_sys") && has("gpkg_contents")) {
            self.init(format: "GeoPackage",
                      tables: Set(ordinary.filter { sqlNameHasPrefix($0.name, "gpkg_") }.map { sqlNameKey($0.name) }))
            return
        }
        func columns(_ name: String) -> Set<[UInt8]>? {
            if let table = ordinary.first(where: { sameSQLName($0.name, name) }) { return Set(table.columns.map { sqlNameKey($0.name) }) }
            if let view = schema.views.first(where: { sameSQLName($0.name, name) }) { return Set(view.columns.map(sqlNameKey)) }
            return nil
        }
        let tileColumns = Set(["zoom_level", "tile_column", "tile_row", "tile_data"].map(sqlNameKey))
        guard has("metadata"), let metadata = columns("metadata"), metadata.isSuperset(of: [sqlNameKey("name"), sqlNameKey("value")]),
              let tiles = columns("tiles"), tiles.isSuperset(of: tileColumns) else {
            self = .none
            return
        }
        var defined: Set<[UInt8]> = [sqlNameKey("metadata")]
        for name in ["tiles", "grids", "grid_data"] {
            if has(name) {
                defined.insert(sqlNameKey(name))
            } else if let view = schema.views.first(where: { sameSQLName($0.name, name) }) {
                let tokens = tokenizeSQL(view.sql)
                for table in ordinary where tokensMention(tokens[...], table.name, includingStrings: false) {
                    defined.insert(sqlNameKey(table.name))
                }
            }
        }
        self.init(format: "MBTiles", tables: defined)
    }

    /// The format whose specification defines `table`, or nil.
    func definer(of table: String?) -> String? {
        guard let format, let table, tables.contains(sqlNameKey(table)) else { return nil }
        return format
    }
}
