/** Usernames follow the ArcGIS rule: letters, digits and . _ - @, 6 to 128 characters. */
export const USERNAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{5,127}$/;
