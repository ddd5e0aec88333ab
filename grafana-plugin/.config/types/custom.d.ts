// Image imports resolve to URLs (webpack's asset modules), as in create-plugin.
declare module '*.png';
declare module '*.jpg';
declare module '*.svg' {
  const content: string;
  export default content;
}
