export async function startPostgres() { throw new Error("not yet"); }
