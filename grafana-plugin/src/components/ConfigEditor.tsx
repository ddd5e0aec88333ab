import { DataSourcePluginOptionsEditorProps } from '@grafana/data';
import { DataSourceHttpSettings } from '@grafana/ui';

import { TailrootOptions, TailrootSecureJsonData } from '../types';

type Props = DataSourcePluginOptionsEditorProps<TailrootOptions, TailrootSecureJsonData>;

/**
 * ConfigEditor is Grafana's standard HTTP settings form: URL, timeout,
 * basic auth (password kept in secureJsonData), TLS and custom headers
 * (jsonData.httpHeaderNameN / secureJsonData.httpHeaderValueN). The backend
 * builds its HTTP client from exactly these fields.
 */
export function ConfigEditor({ options, onOptionsChange }: Props) {
  return (
    <DataSourceHttpSettings
      defaultUrl="http://localhost:9490"
      dataSourceConfig={options}
      onChange={onOptionsChange}
      showAccessOptions={false}
    />
  );
}
