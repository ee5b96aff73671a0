import { fuzzArea } from "./harness.js";

// Feature services: layers, queries and edits, attachments, and their definitions (admin).
fuzzArea("services");
