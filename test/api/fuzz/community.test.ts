import { fuzzArea } from "./harness.js";

// Groups and their members and invitations, users and their own settings.
fuzzArea("community");
