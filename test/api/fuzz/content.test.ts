import { fuzzArea } from "./harness.js";

// Items, users' content and folders, groups' content, search.
fuzzArea("content");
