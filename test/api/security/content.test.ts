import { contentArea } from "./content.matrix.js";
import { describeMatrix, usePortal } from "./harness.js";

// The security matrix of content (content.matrix.ts): items, comments, folders, users' content, a
// group's content and search, on a portal of its own.
usePortal(contentArea);
describeMatrix(contentArea);
