// Placeholder until the S3 client lands: the target must have a source file.
import LitectlCore
